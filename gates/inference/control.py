"""G3's control baseline judged as the candidate is: its failed requests and its unfit load
generator count against the level (issue #43). Pure.

The baseline runs again in G3, in ABBA pairs with the candidate, as the control the gains are
measured against. A control the instrument failed in, or whose requests failed, inflates the
baseline's TTFT or deflates its throughput, and so inflates the gain: the direction that
favours PASS. Neither may go unseen.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.verdicts import G3, Limit, Measurement
from .repetitions import Repetition

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
    ERROR), never a PASS, while the candidate had none.
    """
    base, cand = [b for b, _ in level], [x for _, x in level]
    errors, control = sum(r.errors for r in cand), sum(r.errors for r in base)
    limit = Limit.at_most(0, "requests")
    texts = "; ".join(r.error_text for r in base if r.error_text)
    said = (f"the control baseline had {control} request error{'s' if control > 1 else ''} in "
            f"its {len(base)} kept repetitions ({sum(r.sent for r in base)} requests sent)"
            + (f": {texts}" if texts else ""))
    if control and not errors:
        return G3["g3.request_errors"].error(
            f"INCONCLUSIVE: {said}; a failed request is left out of the baseline's figures, "
            "which then are no fair control (the candidate had none)", limit, at=c)
    note = ("; ".join(r.error_text for r in cand if r.error_text)
            or f"{sum(r.sent for r in cand)} requests sent")
    return G3["g3.request_errors"].measured(errors, limit, at=c,
                                            note=note + (f"; {said}" if control else ""))
