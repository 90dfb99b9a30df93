"""G1 from several client hosts that are real hosts to fio (issue #48): a network namespace each
(tests/_netns.py), `fio --server` on its own link-local address, and kvgate's fio client talking
to them over veth pairs, as it would to a rack of GPU servers. Every host's fio reads the same
target directory: one shared array. Root only (skipped, saying how, elsewhere).
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from _netns import fio_with_version, test_hosts

from gates.core.configuration import FioSettings, load_thresholds
from gates.core.verdicts import Outcome
from gates.storage import StepOutcome, SubprocessRunner, g1_steps, run_step
from gates.storage import g1hosts as _hosts
from gates.storage.fiohosts import down, keep_host_outputs, probe_hosts
from gates.storage.jobs import shared_steps

pytestmark = pytest.mark.skipif(shutil.which("fio") is None,
                                reason="fio is not installed (apt-get install fio)")
REPO = Path(__file__).resolve().parent.parent


def settings(hosts: list[str], **kw) -> FioSettings:
    values = {"file_size": "8MiB", "runtime": "7s", "ioengine": "psync", "direct": False,
              "steady_state": {"criterion": "bw:50%", "window": "5s", "ramp": "1s"},
              "qd_sweep": [1], "qd_sweep_runtime": "1s", "precondition_passes": 1,
              "timeout": "60s", "kv_jobs": 1, "hosts": hosts, **kw}
    return FioSettings(**values)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    target, evidence = tmp_path / "target", tmp_path / "evidence"
    target.mkdir()
    evidence.mkdir()
    return target, evidence


def precondition(fio: FioSettings, target: Path, evidence: Path) -> None:
    local = fio.model_copy(update={"hosts": []})
    run = run_step(SubprocessRunner(), g1_steps(local)[0], local, target, evidence)
    assert run.ok, run.error


def raw_hosts(paths: list[Path]) -> dict[str, dict]:
    """Each host's own kvrestore read figures, read back from the per-host evidence files."""
    found = {}
    for path in paths:
        if "-host-" in path.name:
            doc = json.loads(path.read_text())
            [entry] = [e for e in doc["client_stats"] if e["jobname"] == "kvrestore"]
            found[doc["hostname"]] = entry["read"]
    return found


def p99_by_hand(bin_sets: list[dict[str, int]]) -> float:
    """The 99th percentile of every latency the hosts counted, by listing the buckets one by
    one: the smallest bucket at or below which 99 % of all I/Os completed."""
    counts: dict[int, int] = {}
    for bins in bin_sets:
        for ns, count in bins.items():
            counts[int(ns)] = counts.get(int(ns), 0) + count
    total, seen = sum(counts.values()), 0
    for ns in sorted(counts):
        seen += counts[ns]
        if seen * 100 >= 99 * total:
            return ns / 1e3
    raise AssertionError("empty histogram")


@pytest.mark.parametrize("count", [1, 2, 4])
def test_kv_restore_from_n_hosts_adds_up_to_the_hosts_own_results(dirs, tmp_path, count):
    """The KV-restore job on 1, 2 and 4 hosts at once: every host reports, kvgate's aggregate is
    what the hosts' own outputs add up to (and fio's 'All clients' agrees), and the merged p99 is
    the one built by hand from the hosts' histograms, not an average of their p99s."""
    target, evidence = dirs
    with test_hosts(count, logs=tmp_path) as hosts:
        fio = settings(hosts.addresses)
        precondition(fio, target, evidence)
        step = next(s for s in shared_steps(fio) if s.key == f"kvscale-{count}") if count > 1 \
            else next(s for s in g1_steps(fio) if s.key == "kvrestore")
        run = run_step(SubprocessRunner(), step, fio, target, evidence)
        assert run.ok, run.error
        kept = keep_host_outputs(evidence / f"fio-{step.key}.json", step.key, evidence)
    outcome = StepOutcome(report=run.report, evidence=[str(p) for p in run.evidence])
    own = raw_hosts(kept)
    assert sorted(own) == sorted(hosts.addresses)
    by_hand = sum(r["io_bytes"] for r in own.values()) / (
        max(r["runtime"] for r in own.values()) / 1e3)
    limits = load_thresholds(REPO / "thresholds.toml", "demo")[0].g1
    aggregate = _hosts.aggregate(outcome, limits)
    # The verdict is the floor's on the summed figure; whether a loop device on a busy
    # machine clears the demo's floor is the loop device's speed, not what is tested here.
    clears = aggregate.limit.contains(aggregate.value)
    assert aggregate.outcome is (Outcome.PASS if clears else Outcome.FAIL), aggregate
    assert aggregate.value * 1e6 == pytest.approx(by_hand, rel=1e-9)  # MB/s in the demo profile
    # Each host ran the whole job at once: the hosts' own bandwidths add up to it too.
    assert sum(r["bw_bytes"] for r in own.values()) == pytest.approx(by_hand, rel=0.02)
    if count > 1:
        assert "fio's 'All clients'" in aggregate.note, aggregate.note
    p99 = _hosts.merged_p99(outcome)
    assert p99.value == p99_by_hand([r["clat_ns"]["bins"] for r in own.values()]), p99
    merged = json.loads((evidence / f"fio-{step.key}-merged-clat.json").read_text())
    assert merged["jobs"]["kvrestore read"]["N"] == sum(r["clat_ns"]["N"] for r in own.values())
    per_host = _hosts.per_host(outcome)
    assert [m.name.rsplit(" ", 1)[1] for m in per_host] == list(run.report.hosts())
    assert all(m.value > 0 and "IOPS" in m.note for m in per_host)


def test_a_host_whose_server_is_down_is_named_before_any_job_runs(dirs, tmp_path):
    """The second host's namespace is up but its fio server is not: the probe names it, and G1's
    fixture runs no job (not even the precondition's writes)."""
    target, evidence = dirs
    with test_hosts(2, logs=tmp_path, start=False) as hosts:
        hosts.hosts[0].start()
        fio = settings(hosts.addresses)
        probes = probe_hosts(SubprocessRunner(), fio, evidence)
    second = hosts.addresses[1]
    assert [bool(p.error) for p in probes] == [False, True]
    problem = down(probes)
    assert problem.startswith("not run:") and f"{second},8765" in problem, problem
    assert hosts.addresses[0] not in problem
    servers = _hosts.fio_servers(probes, "fio-3.33")
    assert servers.outcome is Outcome.ERROR and second in servers.note
    assert list(target.iterdir()) == []


def test_a_host_killed_mid_job_is_an_error_naming_it_and_keeps_the_others_results(dirs,
                                                                                  tmp_path):
    """SIGKILL to every process of the second host two seconds into a 7-second job: the step is
    an ERROR naming that host and fio's word for it; the first host's results stay in the
    evidence (its own file and fio's output)."""
    target, evidence = dirs
    with test_hosts(2, logs=tmp_path) as hosts:
        fio = settings(hosts.addresses)
        precondition(fio, target, evidence)
        step = shared_steps(fio)[-1]
        timer = threading.Timer(2.0, hosts.hosts[1].kill)
        timer.start()
        try:
            run = run_step(SubprocessRunner(), step, fio, target, evidence)
        finally:
            timer.cancel()
        kept = keep_host_outputs(evidence / f"fio-{step.key}.json", step.key, evidence)
    first, second = hosts.addresses
    assert not run.ok
    assert f"no results from fio server(s) {second}" in run.error, run.error
    assert f"host={second} disconnected" in run.error, run.error
    assert run.report is not None and run.report.hosts() == [first]
    assert list(raw_hosts(kept)) == [first]
    assert {p.name for p in run.evidence} >= {f"fio-{step.key}.json", f"fio-{step.key}.log"}
    outcome = StepOutcome(report=run.report, error=run.error)
    assert _hosts.aggregate(outcome, load_thresholds(REPO / "thresholds.toml")[0].g1
                            ).outcome is Outcome.ERROR


def test_a_host_answering_with_another_fio_version_is_named(dirs, tmp_path):
    """The second host runs a fio whose version string says fio-3.99 (a copy of this machine's
    fio with only that string changed: same protocol, another banner in its probe reply)."""
    _, evidence = dirs
    client = SubprocessRunner().run(["fio", "--version"], timeout=30).stdout.strip()
    other = fio_with_version("fio-3.99" if client != "fio-3.99" else "fio-3.98", tmp_path)
    with test_hosts(2, logs=tmp_path, start=False) as hosts:
        hosts.hosts[0].start()
        hosts.hosts[1].start(str(other))
        probes = probe_hosts(SubprocessRunner(), settings(hosts.addresses), evidence)
    assert [p.version for p in probes] == [client, other.name]
    servers = _hosts.fio_servers(probes, client)
    assert servers.outcome is Outcome.FAIL and servers.value == 1
    assert f"{hosts.addresses[1]} answers {other.name}" in servers.note, servers.note
    assert hosts.addresses[0] not in servers.note.split(", the client")[0]


def test_kvgate_inventory_lists_the_hosts_and_their_fio_versions(tmp_path, capsys):
    """`kvgate inventory` asks each [fio] host its fio version: both are listed, the one that
    runs another fio with that version, and a host that does not answer with its error."""
    from gates.commands import inventory_command
    other = fio_with_version("fio-3.99", tmp_path)
    with test_hosts(3, logs=tmp_path, start=False) as hosts:
        hosts.hosts[0].start()
        hosts.hosts[1].start(str(other))
        site_file = tmp_path / "site.toml"
        site_file.write_text(f'[site]\nname = "inv"\n[target]\ndirectory = "{tmp_path}"\n'
                             '[fio]\nfile_size = "1MiB"\nhosts = ['
                             + ", ".join(f'"{a}"' for a in hosts.addresses) + "]\n")
        assert inventory_command(site_file, as_json=True) == 0
        body = json.loads(capsys.readouterr().out)
        assert inventory_command(site_file, as_json=False) == 0
        table = capsys.readouterr().out
    client = SubprocessRunner().run(["fio", "--version"], timeout=30).stdout.strip()
    listed = {h["host"]: h for h in body["fio_hosts"]}
    first, second, third = hosts.addresses
    assert listed[first]["fio"] == client and listed[second]["fio"] == "fio-3.99"
    assert listed[third]["fio"] == "" and f"{third},8765 did not answer" in listed[third]["error"]
    assert "fio client hosts" in table and "fio-3.99" in table
