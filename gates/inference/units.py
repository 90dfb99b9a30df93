"""What each G2/G3 rule is over, and which of those units gave it a reading (issue #43). Pure.

The expected units are those the run planned and ran (a level's repetitions, its kept pairs,
the files the engine wrote, the probe's contexts), never those that produced a figure: a unit
without one is "not read" with why, so the rule's Coverage (gates.core.verdicts) counts it
against the verdict instead of the rule judging the rest as though it were all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence

from ..core.verdicts import Coverage, Measurement, Outcome
from .repetitions import Repetition

# The units of gates/core/verdicts/declared.py's `over=`, as Coverage names them.
REPS, PAIRS, FILES, CONTEXTS = "repetitions", "pairs", "files", "contexts"
WHY_MAX = 200  # characters of a repetition's error text said beside its label

Pick = Callable[[Repetition], float | None]


def ttft_p50(r: Repetition) -> float | None:
    """A repetition's TTFT p50, what G2's CV and G3's reduction take of it."""
    return r.ttft_p50


def throughput(r: Repetition) -> float | None:
    """A repetition's output throughput, what G2's CV and G3's gain take of it."""
    return r.output_throughput


def why_none(r: Repetition, what: str) -> str:
    """Why a repetition gave no figure: what its failed requests said, or that none succeeded."""
    if not r.sent:
        return f"no {what}: it sent no request"
    if r.error_text:
        return f"no {what}: {r.error_text[:WHY_MAX]}"
    if r.errors:
        return f"no {what}: {r.errors} failed requests"
    return f"no {what}: no successful request"


def usable(value: float | None) -> bool:
    """A figure a rule can use: there, finite and > 0 (a 0 s TTFT or 0 tok/s is no reading)."""
    return value is not None and math.isfinite(value) and value > 0


def planned(reps: Sequence[Repetition], first_look: int) -> dict[Hashable, str]:
    """The repetitions of one G2 level its plan ran at least (g2.repetitions) and that are not
    in it (a stored record cut short), each with why: the level is numbered from #1."""
    ran = {r.repetition for r in reps}
    return {i + 1: f"not run (the plan's first look is at g2.repetitions {first_look})"
            for i in range(first_look) if i not in ran}


def coverage(units: dict[Hashable, Repetition], why: Callable[[Repetition], str],
             not_run: dict[Hashable, str] | None = None) -> Coverage:
    """The units read (why(r) == ""), those not (with why), and the planned ones not run."""
    gaps = {u: w for u, r in units.items() if (w := why(r))} | dict(not_run or {})
    expected = [*units, *(u for u in not_run or {} if u not in units)]
    if all(isinstance(u, int) for u in expected):
        expected.sort()
    return Coverage(expected, [u for u in units if u not in gaps], gaps, what=REPS)


def rep_figures(units: dict[Hashable, Repetition], pick: Pick, what: str,
                not_run: dict[Hashable, str] | None = None) -> tuple[Coverage, list[float]]:
    """Each read repetition's figure, in unit order, and the Coverage naming those with none."""
    cov = coverage(units, lambda r: "" if usable(pick(r)) else why_none(r, what), not_run)
    return cov, [v for u, r in units.items() if u in cov.read and (v := pick(r)) is not None]


def g2_units(reps: Sequence[Repetition]) -> dict[Hashable, Repetition]:
    """A G2 level's repetitions by their number (#1 …), as its evidence names them; by their
    place in the level where two share a number (a hand-made or merged record), so that no
    repetition is folded into another unread."""
    numbers = [r.repetition + 1 for r in reps]
    if len(set(numbers)) != len(numbers):
        return dict(enumerate(reps, 1))
    return dict(zip(numbers, reps, strict=True))


def arm_units(reps: Iterable[tuple[str, Sequence[Repetition]]]) -> dict[Hashable, Repetition]:
    """Several arms' repetitions by "arm #k", k their place in the arm's list from 1."""
    return {f"{arm} #{k}": r for arm, group in reps for k, r in enumerate(group, 1)}


def pair_coverage(pairs: Sequence[tuple[Repetition, Repetition]], pick: Pick,
                  what: str) -> Coverage:
    """Which pairs (#1 …) have both arms' figure; the others with the arm that had none."""
    failed = {}
    for k, (b, c) in enumerate(pairs, 1):
        why = [f"the {arm} gave {why_none(r, what)}" for arm, r in (("baseline", b),
                                                                     ("candidate", c))
               if not usable(pick(r))]
        if why:
            failed[k] = "; ".join(why)
    expected = range(1, len(pairs) + 1)
    return Coverage(expected, [k for k in expected if k not in failed], failed, what=PAIRS)


def sent(r: Repetition) -> str:
    """Why a repetition says nothing of its requests' errors: it sent none."""
    return "" if r.sent else "sent no request"


def fit_read(r: Repetition) -> str:
    """Every repetition carries the load generator's self-check, fit or not: always read."""
    return ""


def shown(cov: Coverage, m: Measurement) -> Measurement:
    """A REPORTED figure with its coverage: Coverage.judge would make a complete one PASS
    (PASS ranks before REPORTED in SEVERITY, and judge keeps the more severe), so a figure held
    against no limit takes the coverage line itself; an incomplete one is judged (ERROR)."""
    if m.outcome is not Outcome.REPORTED or not cov.complete:
        return cov.judge(m)
    return m.model_copy(update={"evidence": [cov.describe(), *m.evidence],
                                "coverage": cov.covered()})
