"""G2's stability plan, measured: how often it PASSes, FAILs or stays undecided at a true CV.

Simulates a level's repetitions (normal, mean 100, the given true CV; or log-normal with
--lognormal) and runs gates.core.CvPlan on them exactly as the G2 fixture does: look after
g2.repetitions, then after each repetition added while the CV is undecided, up to
g2.repetitions_max; at the budget an undecided CV is INCONCLUSIVE. Beside it, the rule it
replaced: the point CV of the first g2.repetitions held against cv_max.

    .venv/bin/python bench/g2_risk.py [--trials 20000] [--seed 43] [--lognormal]
        [--repetitions 3] [--repetitions-max 8] [--cv-risk 5] [--cv 1,2,4,5,6,8]

The table is bench/README.md's "8. G2's stability plan" (docs/g2-stability.md).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gates.core.configuration import CvPlan, G2Limits  # noqa: E402
from gates.core.statistics.stats import cv_percent  # noqa: E402


def series(rng: random.Random, cv: float, n: int, lognormal: bool) -> list[float]:
    """n repetitions' figures at a true CV of cv (a fraction)."""
    if lognormal:
        s = math.sqrt(math.log(1 + cv * cv))  # the log-normal whose CV is cv
        return [100 * math.exp(rng.gauss(-s * s / 2, s)) for _ in range(n)]
    return [rng.gauss(100, 100 * cv) for _ in range(n)]


def one(plan: CvPlan, xs: list[float]) -> tuple[str, int]:
    """What the plan decides on one level's series, and after how many repetitions."""
    for n in plan.looks:
        iv = plan.interval(xs[:n])
        at = plan.decided(iv) if iv is not None else "undecided"
        if at != "undecided":
            return at, n
    return "inconclusive", plan.looks[-1]


def row(plan: CvPlan, cv: float, trials: int, rng: random.Random, lognormal: bool) -> list[str]:
    """One true CV: the plan's P(PASS), P(FAIL), P(INCONCLUSIVE), mean repetitions, and the
    old point rule's P(PASS) on the first look's repetitions."""
    limits, ends, used, old = plan.limits, [], [], 0
    for _ in range(trials):
        xs = series(rng, cv / 100, limits.repetitions_max, lognormal)
        at, n = one(plan, xs)
        ends.append(at)
        used.append(n)
        point = cv_percent(xs[:limits.repetitions])
        old += point is not None and point <= limits.cv_max
    share = {k: 100 * ends.count(k) / trials for k in ("pass", "fail", "inconclusive")}
    return [f"{cv:g} %", f"{share['pass']:.1f} %", f"{share['fail']:.1f} %",
            f"{share['inconclusive']:.1f} %", f"{statistics.fmean(used):.2f}",
            f"{100 * old / trials:.1f} %"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--lognormal", action="store_true")
    ap.add_argument("--repetitions", type=int, default=G2Limits().repetitions)
    ap.add_argument("--repetitions-max", type=int, default=G2Limits().repetitions_max)
    ap.add_argument("--cv-risk", type=float, default=G2Limits().cv_risk, help="%%")
    ap.add_argument("--cv", default="1,2,4,5,6,8", help="true CVs, %%, comma-separated")
    a = ap.parse_args(argv)
    limits = G2Limits(repetitions=a.repetitions, repetitions_max=a.repetitions_max,
                      cv_risk=a.cv_risk)
    plan, rng = CvPlan(limits), random.Random(a.seed)
    print(f"# G2 stability plan — cv_max {limits.cv_max:g} %, looks at {plan.looks.start}-"
          f"{plan.looks[-1]} repetitions, cv_risk {limits.cv_risk:g} % "
          f"({100 * plan.look_miss:.3g} % a side a look), {a.trials} trials a row, seed "
          f"{a.seed}, {'log-normal' if a.lognormal else 'normal'} repetitions")
    head = ["true CV", "PASS", "FAIL", "INCONCLUSIVE", "mean repetitions",
            f"old point rule PASS ({limits.repetitions} reps)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for cv in (float(x) for x in a.cv.split(",")):
        print("| " + " | ".join(row(plan, cv, a.trials, rng, a.lognormal)) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
