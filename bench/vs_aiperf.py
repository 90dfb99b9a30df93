"""kvgate vs aiperf: timing error, throughput, CPU and memory of the two load generators.

Against a reference server with known timing (bench/_refserver.py: first token 20 ms after the
request arrives, then one every 5 ms, 32 tokens, every send stamped), kvgate
(``gates.loadgen.run_phase`` in bench/_kvclient.py) and NVIDIA's aiperf 0.13.0 run
interleaved (kvgate, aiperf, kvgate, aiperf) at each concurrency, each as its own process tree
pinned to CPU 0 with the server on CPU 1. Each request's TTFT/ITL error = the client's value -
the server's stamps, matched per request (aiperf by its X-Request-ID header, kvgate by a hash of
its prompt). Then both run against the simulator (profile tiny) at the same constant arrival
rate and each tool's own summary is compared: the parity line. Ratios are kvgate / aiperf.

aiperf lives in its own venv under kvgate's cache ($KVGATE_CACHE, else ~/.cache/kvgate):
``python bench/vs_aiperf.py --install`` creates it. Without it this prints how, and exits 0.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _aiperf import VERSION, text_prompts
from _common import SIM_CPU, Background, Sim, machine, print_table, ratio
from _truth import Side, behind, levels, match, truths, window
from _vsruns import (
    Job,
    RefServer,
    aiperf_bin,
    install,
    run_aiperf,
    run_kvgate,
    tokenizer,
)

INSTALL = "python bench/vs_aiperf.py --install"
SIM_MODEL = "kvgate-sim-tiny"


class _Ours:
    """The CPU of this benchmark's own children (Background subtracts it): reaped clients,
    plus the servers still running."""

    def __init__(self) -> None:
        self.servers: list = []

    def cpu_seconds(self) -> float:
        """Reaped children's CPU + the live servers'."""
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime + sum(s.cpu_seconds() for s in self.servers
                                             if s.proc.poll() is None)


def _job(args, url: str, model: str, c: int, n: int, tag: str, folder: Path) -> Job:
    # A fresh folder per run: a kept folder's earlier export must never be read as this one's.
    shutil.rmtree(folder / tag, ignore_errors=True)
    (folder / tag).mkdir()
    ttft = args.ttft_ms / 1e3 + args.tokens * args.itl_ms / 1e3
    return Job(url=url, model=model, concurrency=c,
               warm=text_prompts(f"{tag}-warm", c, args.prompt_words),
               prompts=text_prompts(tag, n, args.prompt_words), max_tokens=args.tokens,
               folder=folder / tag, timeout=120 + 10 * ttft * (n + c) / c)


def measure(args, exe: Path, tok: Path, ref: RefServer, folder: Path) -> dict:
    """Interleaved pairs at each concurrency: {c: {"kvgate": Side, "aiperf": Side}}."""
    sides, began = {}, time.monotonic()
    ref.stamps()  # start from none
    for c, n in zip(args.concurrency, args.requests, strict=True):
        runs = {"kvgate": [], "aiperf": []}
        for pair in range(args.pairs):
            for who in ("kvgate", "aiperf"):
                job = _job(args, ref.url, ref.model, c, n, f"{who}-c{c}-p{pair}", folder)
                records, m, _ = (run_kvgate(job) if who == "kvgate"
                                 else run_aiperf(job, exe, tok))
                stamps = ref.stamps()
                run = match(records, truths(stamps))
                span = window(records)
                run.cpu, run.peak_rss = m.cpu, m.peak_rss
                if abs(m.cpu - m.kernel_cpu) > 0.1 * max(m.cpu, m.kernel_cpu, 0.1):
                    print(f"note: {who} at c={c}: psutil counted {m.cpu:.2f} CPU s, the "
                          f"kernel {m.kernel_cpu:.2f} s for the reaped tree", file=sys.stderr)
                run.window_cpu = m.cpu_between(*span) if span else None
                runs[who].append(run)
                if stamps["mismatched"]:
                    print(f"note: {stamps['mismatched']} {who} requests asked for another "
                          f"max_tokens than {args.tokens}", file=sys.stderr)
        sides[c] = {k: Side(v) for k, v in runs.items()}
        print(f"concurrency {c}: done ({time.monotonic() - began:.0f} s)", file=sys.stderr)
    return sides


def parity(args, exe: Path, tok: Path, ours: _Ours, folder: Path) -> str:
    """Both clients against the simulator; each tool's own TTFT/ITL p50 and throughput.

    Open loop at the same constant rate: in a closed loop a client's own jitter changes how
    requests queue in the simulator's batch (and so its TTFT), which is not what parity asks.
    """
    rate, n, words = args.sim_rate, args.sim_requests, args.sim_prompt_words
    with Sim() as sim:
        ours.servers.append(sim)
        own = []
        for who in ("kvgate", "aiperf"):
            job = _job(args, sim.url, SIM_MODEL, 8, n, f"{who}-sim", folder)
            job.warm = text_prompts(f"{who}-sim-warm", 8, words)
            job.prompts = text_prompts(f"{who}-sim", n, words)
            job.rate, job.timeout = rate, 120 + 10 * (n + 8) / rate
            own.append((run_kvgate(job) if who == "kvgate" else run_aiperf(job, exe, tok))[2])
    kv, ap = own
    keys = (("TTFT p50", "ttft_p50"), ("ITL p50", "itl_p50"),
            ("output throughput", "output_throughput"))
    parts = [f"{name} {ratio(kv.get(key), ap.get(key))}" for name, key in keys]
    worst = max((abs(kv[k] / ap[k] - 1) for _, k in keys if kv.get(k) and ap.get(k)),
                default=None)
    verdict = ("-" if worst is None else
               f"within {worst:.1%}: " + ("they measure the same thing" if worst <= 0.05
                                          else "they DISAGREE by more than 5 %"))
    return (f"parity on the simulator (profile tiny, constant {rate:g} req/s, {n} requests, "
            f"{words}-word prompts, each tool's own summary, kvgate/aiperf): "
            f"{', '.join(parts)} -> {verdict}")


def _pair(k: float | None, a: float | None, scale: float, digits: int) -> str:
    return " / ".join("-" if v is None else f"{v * scale:,.{digits}f}" for v in (k, a))


# (ratio column, absolute column, Side.value name, scale, digits)
ROWS = (("TTFT err p50", "TTFT err p50 ms", "ttft_p50", 1e3, 2),
        ("TTFT err p99", "TTFT err p99 ms", "ttft_p99", 1e3, 2),
        ("ITL err p50", "ITL |err| p50 us", "itl_p50", 1e6, 1),
        ("req/s", "req/s (server)", "rate", 1, 1),
        ("CPU run", "CPU s (run)", "cpu", 1, 2),
        ("CPU window", "CPU s (window)", "window_cpu", 1, 2),
        ("peak RSS", "peak RSS MB", "peak_rss", 1 / 2**20, 0))


def tables(sides: dict, plain: bool) -> None:
    """kvgate/aiperf ratios with the verdict per concurrency, then the absolute values."""
    ratios, absolute = [], []
    for c, s in sides.items():
        k, a = s["kvgate"], s["aiperf"]
        lost = [sum(r.failed + r.unmatched for r in x.runs) for x in (k, a)]
        n = f"{len(k.pooled('ttft_err'))}/{len(a.pooled('ttft_err'))}" + (
            f" (lost {lost[0]}/{lost[1]})" if any(lost) else "")
        miss, tie = behind(k, a), levels(k, a)
        verdict = ("not ahead: " + ", ".join(miss) if miss else "kvgate ahead"
                   + (f" (level: {', '.join(tie)})" if tie else ""))
        ratios.append([c, n, *(ratio(k.value(key), a.value(key)) for _, _, key, *_ in ROWS),
                       verdict])
        absolute.append([c, *(_pair(k.value(key), a.value(key), sc, d)
                              for _, _, key, sc, d in ROWS)])
    print_table("kvgate / aiperf against known timing (errors matched per request to the "
                "server's stamps: aiperf by X-Request-ID, kvgate by prompt hash)",
                ["c", "n kvgate/aiperf", *(r[0] for r in ROWS), "verdict"], ratios,
                plain=plain)
    print_table("absolute values, kvgate / aiperf (errors pooled over the runs; req/s and "
                "CPU the mean per run; RSS the highest run's)",
                ["c", *(r[1] for r in ROWS)], absolute, plain=plain)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run everything, print the header, the table and the parity."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog=f"Example: python bench/vs_aiperf.py --plain; "
                                            f"install aiperf first with: {INSTALL}")
    parser.add_argument("--install", action="store_true",
                        help=f"create aiperf {VERSION}'s venv under the kvgate cache first")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--requests", type=int, nargs="+", default=[100, 400, 1000, 2000],
                        help="measured requests per level per run (one per level or one for "
                             "all); a warm-up of one per slot comes first")
    parser.add_argument("--pairs", type=int, default=2, help="interleaved runs per client")
    parser.add_argument("--tokens", type=int, default=32, help="output tokens per request")
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--prompt-words", type=int, default=32)
    # Parity: long enough a prefill (~96 x 5.5 byte tokens at 20K tokens/s = 26 ms) that a
    # client's own sub-ms overhead is not what the TTFT ratio shows; 20/s keeps it unqueued.
    parser.add_argument("--sim-rate", type=float, default=20.0,
                        help="parity run: constant arrivals, requests/s")
    parser.add_argument("--sim-requests", type=int, default=300)
    parser.add_argument("--sim-prompt-words", type=int, default=96)
    parser.add_argument("--keep", type=Path, help="keep every run's files (aiperf's "
                        "artifacts, logs) in this folder instead of a temporary one; its "
                        "run folders (kvgate-c1-p0, ...) are replaced")
    parser.add_argument("--plain", action="store_true", help="plain text table, not rich")
    args = parser.parse_args(argv)
    if len(args.requests) == 1:
        args.requests *= len(args.concurrency)
    if len(args.requests) != len(args.concurrency) or min(args.requests + args.concurrency) < 1:
        parser.error("--requests needs one positive count, or one per --concurrency level")
    args.requests = [min(n, 20_000) for n in args.requests]  # bounded
    args.pairs = max(1, min(args.pairs, 10))
    if args.install and install() != 0:
        return 1
    exe, why = aiperf_bin()
    if exe is None:
        print(f"# kvgate vs aiperf: SKIPPED, {why}.\nInstall aiperf {VERSION} (into its own "
              f"venv, from PyPI) with:\n    {INSTALL}")
        return 0
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        # This process only samples and parses: on the server's core, CPU 0 is the client's.
        os.sched_setaffinity(0, {SIM_CPU})
    ours, ref = _Ours(), None
    try:
        with tempfile.TemporaryDirectory(prefix="kvgate-vs-aiperf-") as tmp:
            folder = args.keep or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            tok = tokenizer(exe)
            ref = RefServer(args.tokens, args.ttft_ms, args.itl_ms)
            ours.servers.append(ref)
            background = Background(ours)
            sides = measure(args, exe, tok, ref, folder)
            same = parity(args, exe, tok, ours, folder)
            load = background.report()
    except (RuntimeError, OSError) as exc:  # BenchError, a server that did not start, I/O
        print(f"vs_aiperf: {exc}", file=sys.stderr)
        return 1
    finally:
        if ref is not None:
            ref.close()
    print(f"# kvgate vs aiperf {VERSION} — {machine()}; clients on CPU 0 (each its own "
          f"process tree), server on CPU {SIM_CPU}; known timing: TTFT {args.ttft_ms:g} ms, "
          f"ITL {args.itl_ms:g} ms, {args.tokens} tokens, {args.prompt_words}-word prompts; "
          f"{args.pairs} interleaved pairs per level; {load}"
          + ("" if "NOISY" in load else " -- quiet"))
    tables(sides, args.plain)
    print(same)
    return 0


if __name__ == "__main__":
    sys.exit(main())
