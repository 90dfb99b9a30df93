"""Which windows (and spans) each G4 load and time rule read, and why the others were not. Pure.

Every window the plan committed is expected of the rules over load (the trend rules: those
after the warm-up), and the spans those windows form of the throughput floor. A window that
gave a rule no figure (no request sent, no request that succeeded, no throughput or TTFT
recorded, a clock that ran backwards) is "not read" with why, and counts against the rule
through its Coverage (gates.core.verdicts), never left out of a median or a fit as if it had
not been planned. So does a window the plan expected that was never committed (a soak that
stopped early and was judged as it stood): not_committed names them for every rule.

LOAD_COVERAGE_MIN, not in thresholds.toml (the performer's file: a soak whose unread windows
could be declared away would PASS on what it never looked at), is full coverage, as the health
rules' is. A window the load got no figure from is the one the rule exists to see (the stall,
the engine that stopped answering, the collector that died with it), and no share of the other
windows makes up for it; and a median or a fit that left it out would be biased towards the
windows that went well.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ..core.verdicts import Coverage, Measurement, Outcome
from .rules import SoakPlan, WindowRecord

LOAD_COVERAGE_MIN = 1.0
# A step back of up to a second is the wall clock being disciplined (chrony's makestep steps
# by more than 1 s only; ntpd's threshold is 0.128 s), not a lost gap: a 72-hour soak must not
# be an ERROR for it. Anything larger makes the time between two windows unknown.
CLOCK_SLACK = 1.0
WINDOWS, SPANS = "windows", "spans"
STOPPED = "not committed (the soak stopped before it)"
SKIPPED = "not committed (later windows were)"


def not_committed(windows: list[WindowRecord], plan: SoakPlan, first: int = 0) -> dict[int, str]:
    """The plan's windows from ``first`` on that were never committed, each with why."""
    done = {w.index for w in windows}
    last = max(done, default=-1)
    return {i: SKIPPED if i < last else STOPPED
            for i in range(first, plan.windows) if i not in done}


def _failed_requests(w: WindowRecord) -> str:
    return (f"no request succeeded ({w.errors} of {w.requests} failed, {w.timeouts} "
            "timeouts)")


def requests_not_read(w: WindowRecord) -> str:
    """Why a window has no request-error count ("" when it has one)."""
    return "" if w.requests > 0 else "the load generator sent no request in it"


def throughput_not_read(w: WindowRecord) -> str:
    """Why a window has no throughput figure ("" when it has one).

    A window whose requests were sent and all failed delivered no output: that is a reading of
    0 tok/s (the floor FAILs it), not a gap.
    """
    if w.requests <= 0:
        return "the load generator sent no request in it"
    if w.throughput is None or not math.isfinite(w.throughput):
        return f"no throughput recorded (throughput {w.throughput})"
    return ""


def ttft_not_read(w: WindowRecord) -> str:
    """Why a window has no TTFT p50 ("" when it has one)."""
    if w.requests <= 0:
        return "the load generator sent no request in it"
    if w.ttft_p50 is None or not math.isfinite(w.ttft_p50) or w.ttft_p50 <= 0:
        return (_failed_requests(w) if w.errors >= w.requests else
                f"no TTFT recorded (p50 {w.ttft_p50})")
    return ""


def coverage(windows: list[WindowRecord], why: Callable[[WindowRecord], str],
             absent: Mapping[int, str] | None = None) -> Coverage:
    """The windows expected (those given and those ``absent``: planned, never committed, with
    why) and which of them a rule read, by ``why``."""
    reasons = {w.index: why(w) for w in windows} | dict(absent or {})
    return Coverage(sorted(reasons), [i for i, r in reasons.items() if not r],
                    {i: r for i, r in reasons.items() if r}, what=WINDOWS)


def span_label(block: list[WindowRecord]) -> str:
    """A span by its windows, as the floor's evidence names it."""
    return (f"windows #{block[0].index}-#{block[-1].index}" if len(block) > 1 else
            f"window #{block[0].index}")


def span_coverage(blocks: list[list[WindowRecord]],
                  absent: Mapping[int, str] | None = None) -> Coverage:
    """The spans the committed windows form; a span is read when each of its windows was.

    A window the plan expected and nobody committed (``absent``) leaves the span it would have
    started in unread: the last one begun before it (the first span, for one before them all).
    Those after the last committed window are the spans the soak never ran: one unit, unread.
    """
    labels = [span_label(b) for b in blocks]
    # A span of one window is labelled by it ("window #3"): its reason needs no "#3" again.
    unread = {label: [why if len(b) == 1 else f"#{w.index} {why}"
                      for w in b if (why := throughput_not_read(w))]
              for label, b in zip(labels, blocks, strict=True)}
    last, after = blocks[-1][-1].index, []
    for i, why in sorted((absent or {}).items()):
        if i > last:
            after.append(i)
            continue
        at = max((k for k, b in enumerate(blocks) if b[0].index <= i), default=0)
        unread[labels[at]].append(f"#{i} {why}")
    failed = {label: _some(said) for label, said in unread.items() if said}
    if after:
        label = (f"windows #{after[0]}-#{after[-1]}" if len(after) > 1 else f"window #{after[0]}")
        labels.append(label)
        failed[label] = "not committed (the soak stopped before them)"
    return Coverage(labels, [x for x in labels if x not in failed], failed, what=SPANS)


def _some(said: list[str], named: int = 5) -> str:
    return "; ".join(said[:named]) + (f"; and {len(said) - named} more"
                                      if len(said) > named else "")


def undecided(cov: Coverage, measured: Measurement) -> Measurement:
    """A rule whose FAIL more windows could undo (a median, a fit, a spread), capped.

    Below full coverage its own outcome does not stand: the median or the fit over the windows
    read is shown, and the coverage decides (ERROR below the minimum, MARGINAL above it).
    """
    cap = cov.cap(LOAD_COVERAGE_MIN)
    if cap is Outcome.PASS or measured.outcome in (Outcome.ERROR, Outcome.NOT_APPLICABLE):
        return cov.judge(measured, LOAD_COVERAGE_MIN)
    said = (f"{cov.describe()}: a verdict needs {LOAD_COVERAGE_MIN:.0%} of {cov.what} read; "
            f"over those read alone it would be {measured.outcome.value}, which the "
            f"{cov.what} not read could change")
    judged = cov.judge(measured, LOAD_COVERAGE_MIN)
    return judged.model_copy(update={"outcome": cap, "note": "; ".join(
        t for t in (said, measured.note) if t)})


def clock_coverage(windows: list[WindowRecord], plan: SoakPlan) -> Coverage:
    """The plan's windows whose time on the clock is known: committed, finite, not ending
    before they start, and not starting before the window before them (or the soak) did end.

    A clock that stepped back (an NTP step, a reboot whose RTC was reset) makes the time
    between two windows unknown: a gap there would be measured as none. After a window never
    committed, nobody knows how long the soak was not running.
    """
    failed, before = dict(not_committed(windows, plan)), plan.started
    for w in sorted(windows, key=lambda x: x.index):
        if not (math.isfinite(w.start) and math.isfinite(w.end)) or w.end < w.start:
            failed[w.index] = f"its clock reads {w.start:.3f} to {w.end:.3f}"
        elif before is not None and w.start < before - CLOCK_SLACK:
            failed[w.index] = (f"starts {before - w.start:.3g} s before the window before it "
                               "ended (the clock stepped back): the time between is unknown")
        # From here the clock runs on from where it stepped to.
        before = w.end if math.isfinite(w.end) else before
    return Coverage(sorted({w.index for w in windows} | set(failed)),
                    [w.index for w in windows if w.index not in failed], failed, what=WINDOWS)


def planned_coverage(windows: list[WindowRecord], plan: SoakPlan) -> Coverage:
    """The plan's windows: those committed whose own length the clock reads are read; one not
    committed, or whose clock reads no length, is not (its time under load is unknown). A step
    back between two windows leaves the time between them unknown (the gap rule's), not their
    lengths."""
    failed = not_committed(windows, plan)
    failed |= {w.index: f"its clock reads {w.start:.3f} to {w.end:.3f}" for w in windows
               if not (math.isfinite(w.start) and math.isfinite(w.end)) or w.end < w.start}
    return Coverage(sorted({w.index for w in windows} | set(failed)),
                    [w.index for w in windows if w.index not in failed], failed, what=WINDOWS)
