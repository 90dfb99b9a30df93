"""G3's control baseline judged as the candidate is: its failed requests and its unfit load
generator count against the level (issue #43). Pure.

The baseline runs again in G3, in ABBA pairs with the candidate, as the control the gains are
measured against. A control the instrument failed in, or whose requests failed, inflates the
baseline's TTFT or deflates its throughput, and so inflates the gain: the direction that
favours PASS. Neither may go unseen.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.statistics import median, speedup
from ..core.verdicts import G3, Coverage, Declared, Limit, Measurement
from .comparison import Pair
from .repetitions import Repetition
from .units import arm_units, coverage, fit_read, rep_figures, sent, throughput, ttft_p50

# G3's arms by the words its measurements use for them.
_ARM_WORDS = {"baseline": "the control baseline's", "candidate": "the candidate's"}


def unfit_by_arm(reps: Sequence[Repetition]) -> str:
    """How many of each arm's repetitions were unfit, when the repetitions are several arms'."""
    arms = sorted({r.arm for r in reps})
    if len(arms) < 2:
        return ""
    return " (" + ", ".join(
        f"{_ARM_WORDS.get(a, a)} {sum(not r.fit for r in reps if r.arm == a)} of "
        f"{sum(r.arm == a for r in reps)}" for a in arms) + ")"


def g3_request_errors(c: int, level: Sequence[tuple[Repetition, Repetition]]) -> Measurement:
    """Both arms' failed requests in the level's kept (baseline, candidate) pairs.

    The candidate's are its own failure (FAIL). The control baseline's leave its figures short
    of the requests that failed, and so say nothing fair about the gain: INCONCLUSIVE (an
    ERROR), never a PASS, while the candidate had none. Over both arms' repetitions: one that
    sent no request counts nothing, and is not read.
    """
    base, cand = [b for b, _ in level], [x for _, x in level]
    cov = coverage(arm_units((("baseline", base), ("candidate", cand))), sent)
    errors, control = sum(r.errors for r in cand), sum(r.errors for r in base)
    limit = Limit.at_most(0, "requests")
    texts = "; ".join(r.error_text for r in base if r.error_text)
    said = (f"the control baseline had {control} request error{'s' if control > 1 else ''} in "
            f"its {len(base)} kept repetitions ({sum(r.sent for r in base)} requests sent)"
            + (f": {texts}" if texts else ""))
    declared = G3["g3.request_errors"]
    if control and not errors:
        return cov.judge(declared.error(
            f"INCONCLUSIVE: {said}; a failed request is left out of the baseline's figures, "
            "which then are no fair control (the candidate had none)", limit, at=c))
    note = ("; ".join(r.error_text for r in cand if r.error_text)
            or f"{sum(r.sent for r in cand)} requests sent")
    return declared.stamp(cov.judge(Measurement.measured(
        "", errors, limit, note=note + (f"; {said}" if control else ""))), c)


def _reasons(reps: Sequence[Repetition]) -> str:
    return "; ".join(sorted({x for r in reps if not r.fit for x in r.unfit_reasons}))


def self_check(declared: Declared, c: int, cov: Coverage, reps: Sequence[Repetition],
               set_aside: Sequence[Pair] = ()) -> Measurement:
    """Repetitions where the load generator, not the server, was the bottleneck.

    An unfit repetition is kvgate's instrument failing, not the storage: its timestamps carry
    the generator's own delay, so the level is INCONCLUSIVE (an ERROR), never a FAIL. G3
    gives both arms' kept repetitions (each arm's count is said); its pairs that were unfit
    and measured again (set_aside) are named, not judged. cov: the repetitions the level
    planned and ran (a planned one that did not run is not read).
    """
    unfit = [r for r in reps if not r.fit]
    limit = Limit.at_most(0, "repetitions")
    again = (f"; {len(set_aside)} unfit pair{'s' if len(set_aside) > 1 else ''} set aside "
             f"unjudged and measured again ({_reasons([r for p in set_aside for r in p])})"
             if set_aside else "")
    if not unfit:
        return declared.stamp(cov.judge(Measurement.measured(
            "", 0, limit, note="event-loop and schedule lag within limits" + again)), c)
    reasons = _reasons(unfit)
    return cov.judge(declared.error(
        f"INCONCLUSIVE: the load generator was unfit in {len(unfit)} of {len(reps)} "
        f"repetitions{unfit_by_arm(reps)}, so their timings carry its own delay and say "
        "nothing of the storage "
        f"(re-run with nothing else on the machine){': ' + reasons if reasons else ''}{again}",
        limit, at=c))


def g3_loadgen_fit(c: int, level: Sequence[Pair], set_aside: Sequence[Pair]) -> Measurement:
    """Both arms' kept repetitions: an unfit control baseline inflates its own TTFT, and so
    the reduction, as surely as an unfit candidate deflates the candidate's."""
    reps = [r for p in level for r in p]
    units = arm_units((("baseline", [b for b, _ in level]), ("candidate", [x for _, x in level])))
    return self_check(G3["g3.loadgen_fit"], c, coverage(units, fit_read), reps, set_aside)


def recompute_reference(c: int, cand: list[Repetition],
                        recompute: list[Repetition]) -> list[Measurement]:
    """How much faster the candidate is than recomputing the KV (the seed's 12.6x / 18.3x).

    Over every repetition of both arms at the level: a median of those that gave a figure is
    not the arm's, so one without a figure makes the speed-up an ERROR naming it.
    """
    out = []
    units = arm_units((("candidate", cand), ("recompute", recompute)))
    for id, pick, what, better in (
            ("g3.ttft_speedup_vs_recompute", ttft_p50, "TTFT p50", "lower"),
            ("g3.throughput_speedup_vs_recompute", throughput, "output throughput", "higher")):
        cov, _ = rep_figures(units, pick, what)
        a = [v for r in recompute if (v := pick(r))]
        b = [v for r in cand if (v := pick(r))]
        limit = Limit(lo=1.0, lo_inclusive=False, unit="x", relative_to="the recompute arm")
        out.append(G3[id].stamp(cov.judge(Measurement.measured(
            "", speedup(median(a), median(b), better=better), limit)), c)
            if cov.complete else
            cov.judge(G3[id].error(f"{len(cov.missing)} of {len(cov.expected)} repetitions "
                                   f"of the two arms gave no {what}", limit, at=c)))
    return out
