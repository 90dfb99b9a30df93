"""G4's trend rules: throughput floor and TTFT drift, each with its interval. Pure.

The window is the unit (requests inside one queue behind each other). The floor and the drift
compare spans, and their intervals come from the spans' own noise where a soak has spans
enough (gates.soak.noise, longrun: batch means over spans, which hold when a slow state of the
machine outlasts a window); the SNIA rounds' (gates.soak.stability) from the window-to-window
noise (spans). A figure that noise can explain is MARGINAL: a machine whose speed moves neither
passes a drifting array nor fails a steady one. Every window after the warm-up is expected
(gates.soak.readings): the floor is over the spans they form, each read only when all its
windows were, the drift over the windows; what was not read counts against the rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from ..core.configuration import G4Limits
from ..core.verdicts import G4, Limit, Measurement, Outcome
from .noise import noise_of
from .readings import (
    LOAD_COVERAGE_MIN,
    coverage,
    span_coverage,
    span_label,
    throughput_not_read,
    ttft_not_read,
    undecided,
)
from .rules import HOUR, WindowRecord, span
from .spans import span_length, spans


def _decided(measured: Measurement, outcome: Outcome, note: str) -> Measurement:
    return measured.model_copy(update={"outcome": outcome, "note": note})


def throughput_floor(windows: list[WindowRecord], limits: G4Limits, confidence: float = 0.95,
                     warmup_note: str = "", g3_throughput: float | None = None, *,
                     absent: Mapping[int, str] | None = None) -> Measurement:
    """Every later span's median window throughput, as a % of the first span's, >= the floor.

    The reference is the soak's own first span (after the warm-up): the same engine, load and
    machine set-up as every span held against it. G3's figure is another load (a burst of
    probes on restored contexts, against closed-loop multi-turn sessions: the soak ran at 64-98 %
    of it on one site, moving with G3's workload and engine, not with the array), so it is
    shown, never judged. A span is an hour (1/6 of a shorter run), not a window: the lowest of
    864 windows falls ~3 window-noises under their mean on a steady array. Each later span's
    ratio to the first carries both spans' noise; PASS needs every ratio's lower bound at or
    above the floor, FAIL one whose upper bound (Bonferroni over the later spans) is under it.
    ``absent``: the windows after the warm-up the plan expected and nobody committed, with why.
    """
    name = G4["g4.throughput_floor"].title
    if not windows:
        return Measurement.error(name, "no committed window after the warm-up")
    blocks, span_note = spans(windows)
    cov = span_coverage(blocks, absent)
    limit = Limit.at_least(limits.throughput_floor, "%", key="g4.throughput_floor",
                           relative_to=f"the soak's first span ({_where(blocks[0])})")
    read = [w for w in windows if not throughput_not_read(w)]
    idle = [w for w in read if w.throughput <= 0]
    if idle:  # no noise explains a window without output; more spans cannot undo it
        return cov.judge(Measurement.measured(name, 0.0, limit, evidence=[
            f"window #{w.index}: no output tokens in {w.seconds:.0f} s" for w in idle][:20],
            note=f"{len(idle)} of {len(windows)} windows produced no output"), LOAD_COVERAGE_MIN)
    if len(blocks) < 2:
        return cov.judge(Measurement.error(
            name, f"{_count(windows)} after the warm-up make one span: the floor holds later "
                  "spans against the first, so it needs two or more", limit))
    if (label := span_label(blocks[0])) not in cov.read:
        return cov.judge(Measurement.error(
            name, f"the first span ({label}) holds a window not read, {cov.failed[label]}: "
                  "every later span is held against its median", limit))
    # Only spans read in full are compared (and read noise from); the others count against
    # the rule through its coverage.
    blocks = [b for b in blocks if span_label(b) in cov.read]
    if len(blocks) < 2:
        return cov.judge(Measurement.error(name, "no later span was read in full", limit))
    first, later = blocks[0], blocks[1:]
    reference = statistics.median(w.throughput for w in first)
    rates = [[w.throughput for w in b] for b in blocks]
    # Each later span's noise from the spans it is not compared with (longrun.span_noise).
    noises = [noise_of(rates, leave_out=(0, j)) for j in range(1, len(blocks))]
    every = 1 - (1 - confidence) / len(later)

    def bounds(j: int, level: float) -> tuple[float, float, float]:
        """Later span j's median as a % of the first span's, and that ratio's interval."""
        ratio = statistics.median(rates[j + 1]) / reference * 100
        half = noises[j].half((len(later[j]), len(first)), level)
        return ratio, ratio * math.exp(-half), ratio * math.exp(half)
    # (span, its interval at the confidence, its upper bound held simultaneously over spans)
    judged = [(j, bounds(j, confidence), bounds(j, every)[2]) for j in range(len(later))]
    floor = limits.throughput_floor
    failing = [j for j in judged if j[2] < floor]
    if failing:
        at, (share, _, _), _ = min(failing, key=lambda j: j[2])
        lo, hi = bounds(at, every)[1:]
    else:
        at, (share, lo, hi), _ = min(judged, key=lambda j: j[1][1])
    decisive, noise = later[at], noises[at]
    below = [f"window #{w.index}: {w.throughput:.4g} tok/s" for w in read
             if w.throughput < floor / 100 * reference]
    evidence = [f"lowest later span ({_where(decisive)}, {_count(decisive)}): median "
                f"{share / 100 * reference:.4g} tok/s, {share:.3g} % of the first span's, "
                f"interval [{lo:.3g}, {hi:.3g}] %",
                f"first span ({_where(first)}, {_count(first)}): median {reference:.4g} "
                f"tok/s; the floor {floor:g} % of it is {floor / 100 * reference:.4g} tok/s",
                f"{noise.said('throughput')}; {len(below)} single windows below the floor",
                *_for_the_record(g3_throughput, reference), *below[:20]]
    measured = Measurement.measured(name, share, limit, evidence=evidence, interval=(lo, hi))
    rule = (f"{len(blocks)} spans ({span_note}), each later one against the first; PASS needs "
            f"every later span's {confidence * 100:g} % lower bound at or above the floor, FAIL "
            f"a span whose upper bound at {every * 100:.4g} % "
            "(Bonferroni over the later spans) is under it")
    rule = "; ".join(t for t in (rule, warmup_note) if t)
    # A span read in full and below the floor FAILs whatever the spans not read hold.
    if failing:
        return cov.judge(_decided(measured, Outcome.FAIL, f"{len(failing)} of {len(later)} "
                                  f"later spans below the floor; {rule}"), LOAD_COVERAGE_MIN)
    if all(low >= floor for _, (_, low, _), _ in judged):
        return cov.judge(_decided(measured, Outcome.PASS, rule), LOAD_COVERAGE_MIN)
    return cov.judge(_decided(measured, Outcome.MARGINAL, (
        f"the lowest later span's {confidence * 100:g} % interval [{lo:.3g}, {hi:.3g}] % of the "
        f"first span's crosses the floor ({floor:g} %) at a noise of "
        f"{noise.per_window * 100:.3g} % per window: longer spans (more windows each) decide; "
        f"{rule}")), LOAD_COVERAGE_MIN)


def _where(block: list[WindowRecord]) -> str:
    return span_label(block)


def _count(block: list[WindowRecord]) -> str:
    return f"{len(block)} window{'s' * (len(block) != 1)}"


def _for_the_record(g3_throughput: float | None, reference: float) -> list[str]:
    """G3's figure beside the soak's: shown, not judged (another load)."""
    if not g3_throughput or g3_throughput <= 0:
        return []
    return [f"for the record, not judged: G3's candidate probe throughput at this concurrency "
            f"was {g3_throughput:.4g} tok/s, another load (a burst of probes on restored "
            f"contexts); the first span ran at {reference / g3_throughput * 100:.3g} % of it"]


def drift_spans(windows: list[WindowRecord]) -> tuple[list[WindowRecord], list[WindowRecord], str]:
    """The first and last span of effective time (an hour; 1/6 of the run below 2 h), a note."""
    total = math.fsum(w.seconds for w in windows)
    length, note = span_length(total)
    if length == HOUR:
        note = "first hour vs last hour"
    first, last, at = [], [], 0.0
    for w in windows:
        if at < length:
            first.append(w)
        if at + w.seconds > total - length:
            last.append(w)
        at += w.seconds
    return first, last, note


def _soak_for(per_span: int, windows: list[WindowRecord]) -> str:
    seconds = statistics.median(w.seconds for w in windows)
    if 6 * per_span * seconds < 2 * HOUR:
        return f" (a soak of about {span(round(6 * per_span * seconds))} at these windows)"
    return f" (an hour holds {HOUR / seconds:.0f} of these windows)"


def ttft_drift(windows: list[WindowRecord], limits: G4Limits, confidence: float = 0.95,
               warmup_note: str = "", *,
               absent: Mapping[int, str] | None = None) -> Measurement:
    """TTFT p50 drift, last span vs first, within ±ttft_drift_max (median of window p50s).

    The drift's interval comes from the spans' own noise (gates.soak.noise): a
    drift the spans' few windows cannot tell from that noise is MARGINAL, never a PASS, and a
    FAIL needs the whole interval beyond the limit, so a noisy machine neither passes a
    drifting array nor fails a steady one. A MARGINAL says how many windows per span would
    decide it.
    """
    name = G4["g4.ttft_drift"].title
    limit = Limit(lo=-limits.ttft_drift_max, hi=limits.ttft_drift_max, unit="%",
                  key="g4.ttft_drift_max")
    first, last, note = drift_spans(windows)
    note = "; ".join(t for t in (note, warmup_note) if t)
    cov = coverage(windows, ttft_not_read, absent)
    a = [w.ttft_p50 for w in first if w.index in cov.read]
    b = [w.ttft_p50 for w in last if w.index in cov.read]
    if not a or not b:
        said = Measurement.error(name, f"no TTFT in the {'first' if not a else 'last'} span "
                                       f"({note})", limit)
        return cov.judge(said) if cov.expected else said
    early, late = statistics.median(a), statistics.median(b)
    # Both directions count: a soak's point is that the operating point does not move.
    drift = (late - early) / early * 100
    blocks = [[w for w in s if w.index in cov.read] for s in spans(windows)[0]]
    blocks = [s for s in blocks if s]
    if sum(map(len, blocks)) < 2:
        return Measurement.error(name, f"{sum(map(len, blocks))} window with a TTFT after the "
                                       "warm-up: a drift needs two or more", limit)
    compared = {w.index for w in first + last}
    noise = noise_of([[w.ttft_p50 for w in s] for s in blocks], leave_out=[
        i for i, s in enumerate(blocks) if compared & {w.index for w in s}])
    half = noise.half((len(a), len(b)), confidence)
    ratio = math.log(late / early)
    interval = ((math.exp(ratio - half) - 1) * 100, (math.exp(ratio + half) - 1) * 100)
    evidence = [f"median window TTFT p50: {early * 1e3:.4g} ms ({len(a)} windows) -> "
                f"{late * 1e3:.4g} ms ({len(b)} windows)",
                f"{noise.said('TTFT p50')}; {confidence * 100:g} % interval of the drift "
                f"[{interval[0]:.3g}, {interval[1]:.3g}] %"]
    measured = Measurement.measured(name, drift, limit, note=note, evidence=evidence,
                                    interval=interval)
    if measured.outcome is Outcome.MARGINAL:
        # How far the log ratio sits from the nearer limit, in the interval's own unit.
        room = min(abs(ratio - math.log(1 + k * limits.ttft_drift_max / 100)) for k in (1, -1))
        need = noise.need(room, confidence)
        decides = (f"about {need} window{'s' if need > 1 else ''} per span would decide a "
                   f"drift this size at this noise{_soak_for(need, windows)}" if need else
                   "no soak of practical length decides a drift this close to the limit")
        measured = _decided(measured, Outcome.MARGINAL, (
            f"the {len(a)} and {len(b)} windows of the spans cannot tell a drift of "
            f"{drift:+.3g} % from the windows' own noise ({noise.per_window * 100:.3g} % per "
            f"window): its {confidence * 100:g} % interval [{interval[0]:.3g}, "
            f"{interval[1]:.3g}] % crosses ±{limits.ttft_drift_max:g} %; {decides}; {note}"))
    return undecided(cov, measured)
