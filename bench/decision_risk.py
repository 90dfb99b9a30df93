"""The G3 rule's operating characteristic, measured from recorded repetitions.

For every recording in bench/data/pairs-*.json (bench/record_pairs.py: ABBA pairs of whole
cold-recovery repetitions of the simulator or of llama.cpp on this machine), every level and
both figures (TTFT p50 reduction, output-throughput gain), the pairs' log ratios d_i are split
into their median (the rule's figure) and their residuals r_i = d_i - median (scaled by
sqrt(n / (n - 1)), so the resampled spread is not the sample's, smaller one). A synthetic
site with a chosen true effect is then mu + r*, where r* is a circular block bootstrap of the
residuals in recorded order (blocks of 3 pairs: a slow stretch of the machine stays together,
as it did), and the gate's own rule (gates.core.sequential, thresholds.toml's plan) decides
it. Printed per recording, level and figure:

* P(PASS), P(FAIL) and the mean pairs used against the true effect (the limit - 10 points to
  + 20, and 0 %: a candidate exactly as fast as its baseline);
* the measured coverage of the nominal 95 % interval (the sign test's, as the rule computes
  it), and of each look's own interval, at every pair count the rule can stop at.

The rule stops at the plan's pair budget or when [g3] comparison_budget is spent, whichever
comes first: no new pair starts after it (fixtures/g3pairs.py), and a figure no look decided
is MARGINAL. So each level gets at most the pairs that start within the budget at the
recording's own pace (its pairs' mean wall time, every recorded level open, pairs going round
the levels), and the characteristic is measured at that cap: a pair budget the time budget
never reaches gives no power.

Targets (issue #24): P(PASS | effect = limit) <= 5 %, P(PASS | limit + 10 points) >= 95 %,
coverage of the nominal 95 % interval >= 93 % at every stopping pair count.

    python bench/decision_risk.py                 # every recording, 2000 synthetic sites each
    python bench/decision_risk.py --sims 500 --plain
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

from _common import HERE, machine, print_table

from gates.core.configuration.config import load_thresholds
from gates.core.statistics import log_ratios, sequential
from gates.core.statistics.paired import looks_problem, sign_interval, to_log
from gates.core.verdicts import Limit
from gates.inference import look_plan

ROOT = HERE.parent
FIGURES = (("TTFT p50 reduction", "reduction", "ttft_p50", "ttft_p50_reduction_min"),
           ("throughput gain", "gain", "throughput", "throughput_gain_min"))
OFFSETS = (-10.0, -5.0, 0.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0)
BLOCK = 3
MIN_PAIRS = 10  # fewer recorded pairs per level are not resampled


def residuals(pairs: list[dict], field: str) -> list[float]:
    """The recorded pairs' log ratios minus their median, scaled to the population spread.

    Of an odd count, the middle pair's residual is 0 by construction: resampled, it would put
    an atom exactly at the true effect (a tie no real, continuous site has), counted as "not
    below the limit" by the sign test, and bias every synthetic site towards PASS (measured:
    P(PASS | limit) 5.6 % at 56 pairs, from 15 pairs with their 0 kept). It is left out, so
    half the resampled mass lies either side of the true effect.
    """
    d = log_ratios([p["reps"]["baseline"][field] for p in pairs],
                   [p["reps"]["candidate"][field] for p in pairs])
    centre, scale = statistics.median(d), math.sqrt(len(d) / (len(d) - 1))
    r = [scale * (x - centre) for x in d]
    if len(r) % 2:
        r.remove(0.0)
    return r


def resample(r: list[float], n: int, rng: random.Random) -> list[float]:
    """n residuals by a circular block bootstrap (blocks of BLOCK consecutive pairs)."""
    out: list[float] = []
    while len(out) < n:
        start = rng.randrange(len(r))
        out += [r[(start + k) % len(r)] for k in range(BLOCK)]
    return out[:n]


def pair_seconds(pairs: list[dict]) -> float:
    """Mean wall time of a recorded pair: its first repetition's start to its last one's end."""
    return statistics.fmean(max(r["end"] for r in p["reps"].values())
                            - min(r["start"] for r in p["reps"].values()) for p in pairs)


def pairs_in_time(budget_s: float, seconds: float, levels: int, index: int, cap: int) -> int:
    """Pairs of the index-th level that start within budget_s: round i of the levels starts
    its j-th pair after (i * levels + j) pairs, and none starts once the budget is spent."""
    return min(cap, max(0, math.floor((budget_s / seconds - index) / levels) + 1))


def characteristic(r, metric, limit, rule, statistic, effect, sims, rng, cap):
    """(P(PASS), P(FAIL), mean pairs used) of the rule at this true effect, at most cap pairs
    (the time budget's), an undecided last look then MARGINAL."""
    mu, passed, failed, used = to_log(metric, effect), 0, 0, 0
    if cap < rule.looks[0]:
        return 0.0, 0.0, float(cap)  # the time budget ends before the first look: never decided
    for _ in range(sims):
        final = sequential([mu + e for e in resample(r, cap, rng)], metric, limit,
                           rule, statistic, spent=cap < rule.budget).final
        passed += final.outcome == "PASS"
        failed += final.outcome == "FAIL"
        used += final.pairs
    return passed / sims, failed / sims, used / sims


def coverage(r, metric, looks, levels, sims, rng):
    """Share of intervals holding the true median, at each pair count in looks (its level)."""
    mu, out = to_log(metric, 30.0), []
    for n, level in zip(looks, levels, strict=True):
        hit = 0
        for _ in range(sims):
            _, lo, hi = sign_interval([mu + e for e in resample(r, n, rng)], level)
            hit += lo <= mu <= hi
        out.append(hit / sims)
    return out


def report(path: Path, args, thresholds) -> list[str]:
    """Print the tables of one recording; the targets it misses."""
    data = json.loads(path.read_text())
    rule, statistic = look_plan(thresholds.g3, thresholds.decision), \
        thresholds.decision.statistic
    missed, rng = [], random.Random(args.seed)
    print(f"\n{path.name}: {data['engine']}; recorded {data['machine']}; "
          f"{len(data['pairs'])} pairs; plan: looks at {list(rule.looks)} pairs, "
          f"at {rule.levels}; false accept counted exactly {100 * rule.risk:.3g} %")
    budget_s = thresholds.g3.comparison_budget
    for index, c in enumerate(data["levels"]):
        pairs = [p for p in data["pairs"] if p["concurrency"] == c]
        if len(pairs) < MIN_PAIRS:
            # A few residuals resampled are a few atoms: the curves come out in steps that
            # say where those atoms lie, not what the rule does (5 llama.cpp pairs: P(PASS)
            # 0 % at the limit and 100 % 10 points above it).
            print(f"\nc = {c}: {len(pairs)} pairs recorded, fewer than {MIN_PAIRS}: not "
                  "measured (record more with bench/record_pairs.py)")
            missed.append(f"{path.name} c={c}: {len(pairs)} pairs, not measured")
            continue
        seconds = pair_seconds(pairs)
        cap = pairs_in_time(budget_s, seconds, len(data["levels"]), index, rule.budget)
        print(f"\nc = {c}: {seconds:.0f} s a recorded pair; [g3] comparison_budget "
              f"{budget_s / 60:g} min with {len(data['levels'])} levels open lets at most "
              f"{cap} of the plan's {rule.budget} pairs start")
        for title, metric, field, key in FIGURES:
            bound = getattr(thresholds.g3, key)
            limit, r = Limit.at_least(bound, "%"), residuals(pairs, field)
            sd = statistics.stdev(r)
            rows = []
            for effect in [0.0] + [bound + o for o in OFFSETS]:
                p, f, n = characteristic(r, metric, limit, rule, statistic, effect,
                                         args.sims, rng, cap)
                rows.append([f"{effect:g} %", f"{100 * p:.1f} %", f"{100 * f:.1f} %",
                             f"{n:.1f}"])
                if effect == bound and p > 0.05:
                    missed.append(f"{path.name} c={c} {title}: P(PASS | limit) {p:.3f}")
                if effect == bound + 10 and p < 0.95:
                    missed.append(f"{path.name} c={c} {title}: P(PASS | limit + 10) {p:.3f}")
            print_table(f"c = {c}, {title} (limit {bound:g} %; recorded sd of ln ratio "
                        f"{sd:.3f}, {len(pairs)} pairs)",
                        ["true effect", "P(PASS)", "P(FAIL)", "pairs used"], rows, args.plain)
            reached = [n for n in rule.looks if n <= cap] or [rule.looks[0]]
            levels = [rule.level(n) for n in reached]
            if reached[-1] < cap < rule.budget:  # the last look, of the plan cut short by time
                reached, levels = reached + [cap], levels + [rule.cut_short(cap).level(cap)]
            nominal = coverage(r, metric, reached, [0.95] * len(levels), args.sims, rng)
            own = coverage(r, metric, reached, levels, args.sims, rng)
            print_table(f"c = {c}, {title}: interval coverage",
                        ["pairs", "95 % interval", "look's interval", "look's level"],
                        [[str(n), f"{100 * a:.1f} %", f"{100 * b:.1f} %", f"{100 * v:.4g} %"]
                         for n, a, b, v in zip(reached, nominal, own, levels, strict=True)],
                        args.plain)
            missed += [f"{path.name} c={c} {title}: 95 % coverage {a:.3f} at {n} pairs"
                       for n, a in zip(reached, nominal, strict=True) if a < 0.93]
    return missed


def main() -> None:
    """Every recording's characteristic, then whether the targets are met."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, nargs="*",
                   help="recordings (default: bench/data/pairs-*.json)")
    p.add_argument("--sims", type=int, default=2000, help="synthetic sites per cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plain", action="store_true", help="plain text tables")
    p.add_argument("--looks", type=int, nargs="*",
                   help="another schedule of looks to measure (default: thresholds.toml's)")
    p.add_argument("--budget-minutes", type=float, default=None, metavar="M",
                   help="another [g3] comparison_budget to measure (default: thresholds.toml's)")
    args = p.parse_args()
    if not 100 <= args.sims <= 100_000:
        sys.exit("--sims must be between 100 and 100000")
    files = args.data or sorted((HERE / "data").glob("pairs-*.json"))
    if not files:
        sys.exit("no recordings: run bench/record_pairs.py first")
    thresholds, _ = load_thresholds(ROOT / "thresholds.toml")
    if args.looks:
        alpha = (1 - thresholds.decision.confidence) / 2
        if problem := looks_problem(args.looks, alpha):
            sys.exit(f"--looks {args.looks}: {problem}")
        thresholds.g3.pair_looks = args.looks
    if args.budget_minutes is not None:
        if not 1 <= args.budget_minutes <= 24 * 60:
            sys.exit("--budget-minutes must be between 1 and 1440")
        thresholds.g3.comparison_budget = 60 * args.budget_minutes
    print(f"decision risk: {machine()}; thresholds revision {thresholds.meta.revision}; "
          f"{args.sims} synthetic sites per cell, seed {args.seed}")
    missed = [m for f in files for m in report(f, args, thresholds)]
    print("\ntargets: " + ("all met" if not missed else "MISSED: " + "; ".join(missed)))


if __name__ == "__main__":
    main()
