"""fio's hosts, asked before any job runs: does each `fio --server` answer, and with which fio?

fio's client sends every server a probe on connecting; the server's reply carries its host name
and fio version, which the client prints with --output-format=normal (fio 3.33 client.c
handle_probe: "hostname=%s, be=%u, %s, os=%s, arch=%s, fio=%s, flags=%lx"). kvgate runs one
null-engine job per host (fio's ioengine=null moves no data: the array is not touched) and reads
that line. A host that does not answer is named before the first job; so is one whose fio is
another version than the client's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..core.configuration import FioSettings
from .fio import ALL_CLIENTS, _json_start
from .fiorun import client_address, host_name
from .runner import CommandRunner, ToolMissing

# fio 3.33 client.c handle_probe (the 3.x line kept the fields up to fio=; flags came later).
PROBE_LINE = re.compile(r"^hostname=(?P<hostname>[^,]*),.*?\bfio=(?P<version>[^,\s]+)", re.M)
PROBE_JOB = "# written by kvgate: asks the fio server its version; ioengine=null moves no data\n" \
    "[kvgate-probe]\nioengine=null\nrw=read\nsize=1m\n"
PROBE_SECONDS = 30.0  # a server that has not answered a null job by then is not answering


@dataclass(frozen=True)
class HostProbe:
    """One host's answer: its fio version, or why there is none."""

    host: str
    version: str = ""
    hostname: str = ""  # the name the server gave itself
    error: str = ""
    evidence: str = ""  # the probe's log file


def parse_probe(text: str) -> tuple[str, str] | None:
    """(hostname, fio version) from fio's client output, or None when no probe reply shows."""
    found = PROBE_LINE.search(text)
    return (found["hostname"], found["version"]) if found else None


def _file_part(host: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", host_name(host))


def probe_host(runner: CommandRunner, fio: FioSettings, host: str,
               evidence_dir: Path) -> HostProbe:
    """Ask one host's fio server its version; the client's output is kept as evidence."""
    evidence_dir = evidence_dir.absolute()
    jobfile = evidence_dir / "fio-probe.fio"
    jobfile.write_text(PROBE_JOB)
    log = evidence_dir / f"fio-probe-{_file_part(host)}.log"
    address = client_address(host, fio.server_port)
    argv = [fio.binary, "--output-format=normal", f"--client={address}", str(jobfile)]
    try:
        done = runner.run(argv, timeout=PROBE_SECONDS, cwd=evidence_dir)
    except (ToolMissing, OSError) as exc:
        return HostProbe(host, error=f"could not run {fio.binary} to ask {address}: {exc}")
    log.write_text(f"$ {' '.join(argv)}\nexit {done.returncode}\n--- stdout\n{done.stdout}"
                   f"\n--- stderr\n{done.stderr}")
    found = parse_probe(done.stdout)
    if found and done.returncode == 0 and not done.timed_out:
        return HostProbe(host, version=found[1], hostname=found[0], evidence=str(log))
    tail = " | ".join((done.stderr + "\n" + done.stdout).strip().splitlines()[-3:])
    why = f"no answer within {PROBE_SECONDS:g} s" if done.timed_out else \
        f"fio exited {done.returncode}" + (f": {tail}" if tail else "")
    return HostProbe(host, version=found[1] if found else "", hostname=found[0] if found else "",
                     error=f"fio server {address} did not answer ({why})", evidence=str(log))


def probe_hosts(runner: CommandRunner, fio: FioSettings, evidence_dir: Path) -> list[HostProbe]:
    """Every [fio] host's answer, in the order site.toml lists them."""
    return [probe_host(runner, fio, host, evidence_dir) for host in fio.hosts]


def down(probes: list[HostProbe]) -> str:
    """Why no job may run, naming every host that did not answer ("" when all did)."""
    failed = [p.error for p in probes if p.error]
    return ("not run: " + "; ".join(failed) + " — every site.toml [fio] hosts entry must run "
            "`fio --server` before G1 starts") if failed else ""


def other_versions(probes: list[HostProbe], client: str) -> list[HostProbe]:
    """The hosts whose fio is not the client's version."""
    return [p for p in probes if p.version and p.version != client]


def keep_host_outputs(output: Path, key: str, evidence_dir: Path) -> list[Path]:
    """Each host's own fio results (its client_stats entries, as fio wrote them) in a file of
    its own, and every job's completion-latency histogram merged over the hosts, bin by bin."""
    try:
        text = output.read_text(errors="replace")
        document = json.JSONDecoder().raw_decode(text[_json_start(text):])[0]
        entries = [e for e in document.get("client_stats", []) if isinstance(e, dict)]
    except (OSError, ValueError, AttributeError):
        return []  # the run's own error already says why its output is unusable
    hosts = [e for e in entries if e.get("jobname") != ALL_CLIENTS and e.get("hostname")]
    kept: list[Path] = []
    for host in dict.fromkeys(e["hostname"] for e in hosts):
        path = evidence_dir / f"fio-{key}-host-{_file_part(str(host))}.json"
        path.write_text(json.dumps({"fio version": document.get("fio version", ""),
                                    "hostname": host, "client_stats": [
                                        e for e in hosts if e["hostname"] == host]}, indent=1))
        kept.append(path)
    merged: dict[str, dict] = {}
    for entry in hosts:
        for direction in ("read", "write"):
            bins = ((entry.get(direction) or {}).get("clat_ns") or {}).get("bins") or {}
            if bins:
                into = merged.setdefault(f"{entry.get('jobname')} {direction}",
                                         {"hosts": [], "N": 0, "bins": {}})
                into["hosts"].append(entry["hostname"])
                for bucket, count in bins.items():
                    into["bins"][bucket] = into["bins"].get(bucket, 0) + count
                    into["N"] += count
    if merged:
        path = evidence_dir / f"fio-{key}-merged-clat.json"
        path.write_text(json.dumps({"merged over hosts": "fio json+ clat_ns bins summed",
                                    "jobs": merged}, indent=1))
        kept.append(path)
    return kept
