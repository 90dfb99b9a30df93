"""G4's trend rules' operating characteristic, measured on recorded soak windows.

G4 holds the soak's windows to two rules with intervals from the windows' own noise
(gates.soak): the TTFT p50 drift (last span vs first, within +-10 %) and the throughput floor
(every later span's median window >= 90 % of the first span's: the soak's own load and engine,
where G3's figure is another load). This script asks how often each rule PASSes,
FAILs or stays MARGINAL when the truth is known.

Residuals come from real windows, not from an assumed distribution: ``--record`` reads the G4
windows of kvgate stores (``reports/kvgate.sqlite`` of `make demo` runs), leaves each run's
warm-up out and stores every run's windows, in order, in bench/data/soak-windows-*.json. A
synthetic soak of N windows is then a circular block bootstrap (blocks of 2, so a slow stretch
of the machine stays together) of the log-residuals (each window over its run's median), on
top of a known truth:

* drift: the second half of the windows is (1 + D) times the first (a step at mid-run: the
  rule's first and last spans then differ by exactly D);
* floor: the middle span of the soak sits at L times the rest's throughput (the first span,
  the floor's reference, included).

Targets: P(PASS | drift at +-10 %) <= 2.5 % and P(PASS | a span at 90 %) <= 2.5 % (the
rule's one-sided risk at [decision] confidence 0.95), P(FAIL | steady) <= 2.5 %.

    python bench/soak_risk.py --record /tmp/demo1*/reports/kvgate.sqlite   # once, then:
    python bench/soak_risk.py --add --record /tmp/demo2*/reports/kvgate.sqlite  # more runs
    python bench/soak_risk.py                                               # 2000 soaks each
    python bench/soak_risk.py --sims 500 --plain
    python bench/soak_risk.py --ar --sims 300    # long soaks of AR(1) windows (bench/_soak_ar.py)
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sqlite3
import statistics
import sys
from pathlib import Path

from _common import HERE, machine, print_table

from gates.core.configuration import G4Limits
from gates.core.verdicts import Outcome
from gates.soak.rules import WindowRecord
from gates.soak.trends import throughput_floor, ttft_drift

DATA = HERE / "data" / "soak-windows-sim.json"
T0 = 1_800_000_000.0
DRIFTS = (-20.0, -15.0, -10.0, -5.0, 0.0, 5.0, 10.0, 15.0, 20.0)
LEVELS = (0.80, 0.85, 0.90, 0.95, 1.00, 1.05)
LENGTHS = (5, 36, 144)  # the demo's judged windows; 12 min and 48 min of 20 s windows


def record(stores: list[Path], warmup: int) -> dict:
    """Every G4 run's windows in these stores, warm-up left out, in order."""
    runs = []
    for path in stores:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT run_id, body FROM soak_windows ORDER BY run_id, idx")
            by_run: dict[str, list[dict]] = {}
            for run_id, body in rows:
                by_run.setdefault(run_id, []).append(json.loads(body))
        for run_id, ws in by_run.items():
            kept = [w for w in ws if w["index"] >= warmup]
            runs.append({"store": str(path), "run_id": run_id, "seconds": [
                w["end"] - w["start"] for w in kept], "throughput": [w["throughput"] for w in kept],
                "ttft_p50": [w["ttft_p50"] for w in kept]})
    return {"what": "G4 windows of `make demo` runs (simulator arms), warm-up left out",
            "recorded": machine(), "warmup_windows": warmup, "runs": runs}


def added(old: dict, new: dict) -> dict:
    """The old recording with the new one's runs that it does not hold yet."""
    if old.get("warmup_windows") != new["warmup_windows"]:
        raise SystemExit(f"the recording left {old.get('warmup_windows')} warm-up windows out, "
                         f"--warmup says {new['warmup_windows']}: one recording, one warm-up")
    held = {r["run_id"] for r in old["runs"]}
    runs = [r for r in new["runs"] if r["run_id"] not in held]
    return {**old, "recorded": f"{old['recorded']}; {len(runs)} runs added {new['recorded']}",
            "runs": old["runs"] + runs}


def residuals(data: dict, key: str) -> list[list[float]]:
    """Each run's log-residuals (window over its run's median), in recorded order."""
    return [[math.log(v / statistics.median(r[key])) for v in r[key]] for r in data["runs"]]


def resample(runs: list[list[float]], n: int, rng: random.Random, block: int = 2) -> list[float]:
    """n residuals: blocks of consecutive windows from the runs, each run read circularly."""
    out: list[float] = []
    while len(out) < n:
        run = rng.choice(runs)
        start = rng.randrange(len(run))
        out.extend(run[(start + k) % len(run)] for k in range(block))
    return out[:n]


def windows(values: list[tuple[float, float]], seconds: float = 20.0) -> list[WindowRecord]:
    return [WindowRecord(index=i, start=T0 + i * seconds, end=T0 + (i + 1) * seconds,
                         requests=10, throughput=t, ttft_p50=p, ttft_p99=p * 2)
            for i, (t, p) in enumerate(values)]


def drift_oc(runs, n, drift, sims, rng, limits) -> dict[Outcome, float]:
    counts = dict.fromkeys(Outcome, 0)
    for _ in range(sims):
        r = resample(runs, n, rng)
        values = [(100.0, math.exp(e) * (1 + drift / 100 if i >= n / 2 else 1.0))
                  for i, e in enumerate(r)]
        counts[ttft_drift(windows(values), limits).outcome] += 1
    return {k: v / sims for k, v in counts.items()}


def floor_oc(runs, n, level, sims, rng, limits) -> dict[Outcome, float]:
    counts = dict.fromkeys(Outcome, 0)
    lo, hi = n * 2 // 6, n * 3 // 6  # the middle (third of six) span
    for _ in range(sims):
        r = resample(runs, n, rng)
        values = [(100.0 * math.exp(e) * (level if lo <= i < max(hi, lo + 1) else 1.0), 1.0)
                  for i, e in enumerate(r)]
        counts[throughput_floor(windows(values), limits).outcome] += 1
    return {k: v / sims for k, v in counts.items()}


def row(label, n, oc) -> list[str]:
    return [label, str(n)] + [f"{oc[o] * 100:.1f}" for o in (Outcome.PASS, Outcome.MARGINAL,
                                                               Outcome.FAIL)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", nargs="+", type=Path, metavar="STORE",
                    help="read the G4 windows of these kvgate.sqlite stores into " + str(DATA))
    ap.add_argument("--add", action="store_true",
                    help="with --record: add those stores' runs to the recording, not replace it")
    ap.add_argument("--warmup", type=int, default=1, help="windows left out per run (1)")
    ap.add_argument("--sims", type=int, default=2000, help="synthetic soaks per row (2000)")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--plain", action="store_true", help="plain text instead of a rich table")
    ap.add_argument("--ar", action="store_true",
                    help="72 h and 1 h soaks of AR(1) windows fitted to the recording, at lag-1 "
                         "correlations 0-0.8, the old rule (independent windows) vs the new")
    args = ap.parse_args(argv)
    if args.record:
        data = record(args.record, args.warmup)
        if args.add and DATA.exists():
            data = added(json.loads(DATA.read_text()), data)
        DATA.write_text(json.dumps(data, indent=1) + "\n")
        print(f"{sum(len(r['throughput']) for r in data['runs'])} windows of "
              f"{len(data['runs'])} runs -> {DATA}")
        return 0
    if not DATA.exists():
        print(f"no recording at {DATA}: run with --record STORE... first", file=sys.stderr)
        return 2
    data = json.loads(DATA.read_text())
    if args.ar:
        from _soak_ar import ar_rows
        said, rows = ar_rows(data, args.sims, args.seed, windows)
        print(f"{machine()}; AR(1) fitted to {len(data['runs'])} recorded runs ({said}); "
              f"{args.sims} synthetic soaks of 5-minute windows per cell, the same for both rules")
        print_table("G4 trend rules on AR(1) windows", ["soak", "truth", "lag-1 correlation",
                    "old %", "new %"], rows, args.plain)
        return 0
    limits, rng = G4Limits(), random.Random(args.seed)
    print(f"{machine()}; {len(data['runs'])} recorded runs ({data['recorded']}); "
          f"{args.sims} synthetic soaks per row")
    cols = ["truth", "windows", "P(PASS) %", "P(MARGINAL) %", "P(FAIL) %"]
    ttft, tput = residuals(data, "ttft_p50"), residuals(data, "throughput")
    print_table("TTFT p50 drift (limit ±10 %): a step of D at mid-run", cols, [
        row(f"drift {d:+g} %", n, drift_oc(ttft, n, d, args.sims, rng, limits))
        for n in LENGTHS for d in DRIFTS], args.plain)
    print_table("Throughput floor (90 % of the first span's): the middle span at L x the rest",
                cols, [
        row(f"span at {lv * 100:g} %", n, floor_oc(tput, n, lv, args.sims, rng, limits))
        for n in LENGTHS for lv in LEVELS], args.plain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
