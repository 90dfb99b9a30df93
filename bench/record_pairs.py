"""Record interleaved baseline/candidate repetitions of a real engine or the simulator.

The data `decision_risk.py` draws its Monte Carlo from: pairs of whole cold-recovery
repetitions (the G2/G3 protocol, `gates.engines.run_arm_once`, the arms of site.toml or of the
installed engine), run in ABBA order at each concurrency level, each with its TTFT p50, output
throughput, who used the CPU, and the machine's CPU reference (gates.inference.cpu_reference)
read between repetitions. Written to bench/data/pairs-<engine>.json after every pair, so a
long recording that is stopped keeps what it measured.

    python bench/record_pairs.py --engine sim --pairs 20            # the simulator arms
    python bench/record_pairs.py --engine llamacpp --pairs 12       # needs make engine
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import HERE, machine

from gates.core.configuration import load_config
from gates.engines.choice import choose_engine
from gates.engines.protocol import run_arm_once
from gates.inference.machine import cpu_reference

ROOT = HERE.parent


def _site(engine: str):
    site, _, thresholds, _ = load_config(ROOT / "site.toml", ROOT / "thresholds.toml")
    prefer = {"sim": "", "llamacpp": "llamacpp", "vllm": "vllm"}[engine]
    site.engine.prefer = prefer
    run = choose_engine(site.engine, site.arms, site.target.directory)
    if engine != "sim" and not run.real:
        sys.exit(f"{engine} is not installed: {run.engine}")
    workload = site.engine_workload(run.workload)
    return site, thresholds, run, workload


def _one(name, run, site, workload, c, index, logs: Path, per_token: int) -> dict:
    arm = run.arms[name]
    t = time.time()
    rep = run_arm_once(name, arm, workload, c, index, log=logs / f"{name}-c{c}-{index}.log",
                       kv_root=site.target.directory, run_id="bench-pairs",
                       kv_bytes_per_token=per_token)
    return {"arm": name, "start": t, "end": time.time(), "ttft_p50": rep.ttft_p50,
            "throughput": rep.output_throughput, "errors": rep.errors,
            "ttfts": rep.ttfts, "cpu": rep.cpu.model_dump() if rep.cpu else None}


def main() -> None:
    """Record --pairs ABBA pairs per level; print one line per repetition."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=["sim", "llamacpp", "vllm"], default="sim")
    p.add_argument("--pairs", type=int, default=12, help="pairs per concurrency level")
    p.add_argument("--levels", type=int, nargs="*", help="default: thresholds.toml [g2]")
    p.add_argument("--out", type=Path, help="default: bench/data/pairs-<engine>.json")
    args = p.parse_args()
    if not 1 <= args.pairs <= 200:
        sys.exit("--pairs must be between 1 and 200")
    site, thresholds, run, workload = _site(args.engine)
    levels = args.levels or thresholds.g2.concurrency
    per_token = run.kv_bytes_per_token or site.workload.kv_bytes_per_token or 1024
    out = args.out or HERE / "data" / f"pairs-{args.engine}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    site.target.directory.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="kvgate-pairs-"))
    doc = {"engine": run.engine, "machine": machine(), "levels": levels,
           "workload": workload.model_dump(mode="json"), "pairs": []}
    ref = cpu_reference()
    try:
        for c in levels:
            for i in range(args.pairs):
                order = ["baseline", "candidate"] if i % 2 == 0 else ["candidate", "baseline"]
                pair = {"concurrency": c, "pair": i, "order": order, "reps": {}}
                for name in order:
                    rep = _one(name, run, site, workload, c, i, logs, per_token)
                    after = cpu_reference()
                    rep["cpu_reference"] = [ref.mean, after.mean]
                    ref = after
                    pair["reps"][name] = rep
                    print(f"c={c} pair {i + 1} {name:9s} p50 {rep['ttft_p50']:.4f} s  "
                          f"tput {rep['throughput']:.2f} tok/s  ref {after.mean * 1e3:.2f} ms"
                          f"  other {rep['cpu']['other_pct'] if rep['cpu'] else 0:.0f} %",
                          flush=True)
                doc["pairs"].append(pair)
                out.write_text(json.dumps(doc, indent=1))
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
