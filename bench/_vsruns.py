"""The runs of bench/vs_aiperf.py: aiperf's venv and tokenizer, the reference server, and one
client run each of kvgate and aiperf.

Both clients run as their own process tree on the client CPU (bench/_proctree.py), bounded by
a timeout; a failure raises BenchError with the command and the log's tail, never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from _aiperf import (
    TOKENIZER_SCRIPT,
    VERSION,
    WORDS,
    Record,
    input_file,
    kvgate_records,
    profile_argv,
    read_run,
    venv_dir,
)
from _common import GEN_CPU, HERE, ServerProcess, server_cpu_args
from _proctree import Measured, run_tree, tail
from _refserver import prompt_key

from gates.engines.installs import cache_root
from gates.inference.process import free_port

# aiperf 0.13.0 with HF_HUB_OFFLINE=1 sends even a local folder through snapshot_download,
# which rejects a path (common/tokenizer.py _from_pretrained_local), so offline mode cannot
# be used; instead the hub's address is a closed local port: any download attempt fails fast.
NO_HUB = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_DISABLE_TELEMETRY": "1",
          "DO_NOT_TRACK": "1",
          # The dataset's memory-mapped files go in the run's folder, not left in /tmp, and
          # no content-addressed cache in ~/.cache/aiperf (common/environment.py, DATASET_).
          "AIPERF_DATASET_MMAP_CACHE_ENABLED": "false"}


class BenchError(RuntimeError):
    """A run failed; the message says which command and shows its log's tail."""


def _pin_cpu() -> int | None:
    ok = hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2
    return GEN_CPU if ok else None


class RefServer(ServerProcess):
    """bench/_refserver.py on 127.0.0.1, pinned to the server CPU; ``url`` once it answers."""

    what = "reference server"

    def __init__(self, tokens: int, ttft_ms: float, itl_ms: float, model: str = "kvgate-ref"):
        self.model = model
        port = free_port()
        cmd = [sys.executable, str(HERE / "_refserver.py"), "--port", str(port),
               "--model", model, "--tokens", str(tokens), "--ttft-ms", str(ttft_ms),
               "--itl-ms", str(itl_ms)]
        try:
            super().__init__(cmd + server_cpu_args(), port)
        except RuntimeError as exc:
            raise BenchError(str(exc)) from None

    def stamps(self) -> dict:
        """Every stamp since the last call (and clear them)."""
        with urllib.request.urlopen(self.url + "/bench/stamps?clear=1", timeout=30) as r:
            return json.loads(r.read())

    def cpu_seconds(self) -> float:
        """CPU the server has used (0 once it is gone: then it is in RUSAGE_CHILDREN)."""
        return 0.0 if self.proc.poll() is not None else super().cpu_seconds()


@dataclass
class Job:
    """One client run: where, how much, and a folder of its own for files and logs."""

    url: str
    model: str
    concurrency: int
    warm: list[str]
    prompts: list[str]
    max_tokens: int
    folder: Path
    timeout: float
    rate: float | None = None  # requests/s at constant arrivals (open loop); None: closed loop


def _check(who: str, argv: list[str], m: Measured, log: Path, job: Job) -> None:
    if m.returncode == 0:
        return
    why = (f"timed out after {job.timeout:.0f} s" if m.returncode is None
           else f"exited {m.returncode}")
    raise BenchError(f"{who} {why} at concurrency {job.concurrency}\ncommand: "
                     f"{' '.join(argv)}\nlast lines of {log}:\n{tail(log)}")


def run_kvgate(job: Job) -> tuple[list[Record], Measured, dict]:
    """kvgate's run_phase in bench/_kvclient.py: records, what it cost, its own summary."""
    spec, out, log = job.folder / "spec.json", job.folder / "out.json", job.folder / "log.txt"
    spec.write_text(json.dumps({"url": job.url, "model": job.model, "warm": job.warm,
                                "concurrency": job.concurrency, "prompts": job.prompts,
                                "max_tokens": job.max_tokens, "rate": job.rate,
                                "request_timeout": job.timeout}))
    argv = [sys.executable, str(HERE / "_kvclient.py"), str(spec), str(out)]
    m = run_tree(argv, timeout=job.timeout, log=log, cpu=_pin_cpu())
    _check("kvgate's client", argv, m, log, job)
    try:
        body = json.loads(out.read_text())
        return kvgate_records(body, prompt_key), m, body["summary"]
    except (OSError, ValueError, KeyError) as exc:
        raise BenchError(f"kvgate's client wrote no usable {out} ({exc})\ncommand: "
                         f"{' '.join(argv)}\nlast lines of {log}:\n{tail(log)}") from None


def run_aiperf(job: Job, aiperf: Path, tokenizer: Path) -> tuple[list[Record], Measured, dict]:
    """``aiperf profile`` on the same prompts: records, what it cost, aiperf's own summary."""
    inputs, log, artifacts = job.folder / "inputs.jsonl", job.folder / "log.txt", \
        job.folder / "artifacts"
    inputs.write_text(input_file(job.warm + job.prompts, job.max_tokens))
    argv = profile_argv(aiperf, url=job.url, model=job.model, tokenizer=tokenizer,
                        inputs=inputs, requests=len(job.prompts),
                        concurrency=job.concurrency, warmup=len(job.warm),
                        artifacts=artifacts, timeout=job.timeout, rate=job.rate)
    env = os.environ | NO_HUB | {"AIPERF_DATASET_MMAP_BASE_PATH": str(job.folder)}
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    m = run_tree(argv, timeout=job.timeout, log=log, env=env, cpu=_pin_cpu(), cwd=job.folder)
    own_log = artifacts / "logs" / "aiperf.log"
    try:
        _check("aiperf", argv, m, log, job)
        records, summary = read_run(artifacts)
    except (OSError, ValueError, KeyError) as exc:  # no export, or not the layout expected
        raise BenchError(f"aiperf's export could not be read ({exc})\ncommand: "
                         f"{' '.join(argv)}\nlast lines of {own_log}:\n{tail(own_log)}") from None
    except BenchError as exc:
        raise BenchError(f"{exc}\nlast lines of {own_log}:\n{tail(own_log)}") from None
    if len(records) != len(job.prompts):
        raise BenchError(f"aiperf exported {len(records)} profiling records of "
                         f"{len(job.prompts)} at concurrency {job.concurrency}\ncommand: "
                         f"{' '.join(argv)}\nlast lines of {own_log}:\n{tail(own_log)}")
    return records, m, summary


def aiperf_bin() -> tuple[Path | None, str]:
    """aiperf's executable when version VERSION answers in its venv; else None and why not."""
    exe = venv_dir(cache_root()) / "bin" / "aiperf"
    if not exe.exists():
        return None, f"aiperf {VERSION} is not installed in {exe.parent.parent}"
    try:
        done = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{exe} --version failed: {exc}"
    if done.stdout.strip() != VERSION:
        return None, (f"{exe} --version says {done.stdout.strip()!r}, not {VERSION} "
                      f"({done.stderr.strip()[-300:]})")
    return exe, ""


def install() -> int:
    """Create aiperf's venv and pip install aiperf==VERSION into it (log: pip.log)."""
    if aiperf_bin()[0] is not None:
        return 0
    venv = venv_dir(cache_root())
    log = venv.parent / "pip.log"
    venv.parent.mkdir(parents=True, exist_ok=True)
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"],
             [str(venv / "bin" / "python"), "-m", "pip", "install", f"aiperf=={VERSION}"]]
    print(f"installing aiperf {VERSION} into {venv} (log: {log}); a few minutes")
    for argv in steps:
        with open(log, "ab") as out:
            out.write(f"\n=== {' '.join(argv)}\n".encode())
            out.flush()
            try:
                code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=1800).returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        if code != 0:
            print(f"install failed ({code}): {' '.join(argv)}\nlast lines of {log}:\n"
                  f"{tail(log)}", file=sys.stderr)
            return 1
    return 0


def tokenizer(exe: Path) -> Path:
    """A local WordLevel tokenizer for aiperf (built once, with aiperf's own `tokenizers`)."""
    folder = cache_root() / "aiperf" / f"tokenizer-wordlevel-{WORDS}"
    if not all((folder / f).exists() for f in ("tokenizer.json", "tokenizer_config.json")):
        done = subprocess.run([str(exe.with_name("python")), "-c", TOKENIZER_SCRIPT,
                               str(folder)], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BenchError(f"building the tokenizer failed:\n{done.stderr[-2000:]}")
    return folder
