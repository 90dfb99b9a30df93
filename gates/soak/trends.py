"""G4's trend rules: throughput floor, TTFT drift, SNIA stability, each with its interval. Pure.

The window is the unit (requests inside one queue behind each other). The floor and the drift
compare spans, and their intervals come from the spans' own noise where a soak has spans
enough (gates.soak.noise, longrun: batch means over spans, which hold when a slow state of the
machine outlasts a window); the SNIA rounds' from the window-to-window noise (spans). A
figure that noise can explain is MARGINAL: a machine whose speed moves neither passes a
drifting array nor fails a steady one.
"""

from __future__ import annotations

import math
import statistics

from ..core.configuration import G4Limits
from ..core.statistics import SteadyStateUnavailable, least_squares_slope, round_averages
from ..core.verdicts import G4, Limit, Measurement, Outcome
from .noise import noise_of
from .rules import HOUR, WindowRecord, span
from .spans import quantile, span_length, spans, window_noise


def _decided(measured: Measurement, outcome: Outcome, note: str) -> Measurement:
    return measured.model_copy(update={"outcome": outcome, "note": note})


def throughput_floor(windows: list[WindowRecord], limits: G4Limits, confidence: float = 0.95,
                     warmup_note: str = "", g3_throughput: float | None = None) -> Measurement:
    """Every later span's median window throughput, as a % of the first span's, >= the floor.

    The reference is the soak's own first span (after the warm-up): the same engine, load and
    machine set-up as every span held against it. G3's figure is another load (a burst of
    probes on restored contexts, against closed-loop multi-turn sessions: the soak ran at 64-98 %
    of it on one site, moving with G3's workload and engine, not with the array), so it is
    shown, never judged. A span is an hour (1/6 of a shorter run), not a window: the lowest of
    864 windows falls ~3 window-noises under their mean on a steady array. Each later span's
    ratio to the first carries both spans' noise; PASS needs every ratio's lower bound at or
    above the floor, FAIL one whose upper bound (Bonferroni over the later spans) is under it.
    """
    name = G4["g4.throughput_floor"].title
    if not windows:
        return Measurement.error(name, "no committed window after the warm-up")
    blocks, span_note = spans(windows)
    first, later = blocks[0], blocks[1:]
    limit = Limit.at_least(limits.throughput_floor, "%", key="g4.throughput_floor",
                           relative_to=f"the soak's first span ({_where(first)})")
    idle = [w for w in windows if not w.throughput or w.throughput <= 0]
    if idle:  # no noise explains a window without output
        return Measurement.measured(name, 0.0, limit, evidence=[
            f"window #{w.index}: no output tokens in {w.seconds:.0f} s" for w in idle][:20],
            note=f"{len(idle)} of {len(windows)} windows produced no output")
    if not later:
        return Measurement.error(name, f"{_count(windows)} after the warm-up make one span: "
                                       "the floor holds later spans against the first, so it "
                                       "needs two or more", limit)
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
    below = [f"window #{w.index}: {w.throughput:.4g} tok/s" for w in windows
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
    if failing:
        return _decided(measured, Outcome.FAIL, f"{len(failing)} of {len(later)} later spans "
                                                f"below the floor; {rule}")
    if all(low >= floor for _, (_, low, _), _ in judged):
        return _decided(measured, Outcome.PASS, rule)
    return _decided(measured, Outcome.MARGINAL, (
        f"the lowest later span's {confidence * 100:g} % interval [{lo:.3g}, {hi:.3g}] % of the "
        f"first span's crosses the floor ({floor:g} %) at a noise of "
        f"{noise.per_window * 100:.3g} % per window: longer spans (more windows each) decide; "
        f"{rule}"))


def _where(block: list[WindowRecord]) -> str:
    return (f"windows #{block[0].index}-#{block[-1].index}" if len(block) > 1 else
            f"window #{block[0].index}")


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


def ttft_drift(windows: list[WindowRecord], limits: G4Limits,
               confidence: float = 0.95, warmup_note: str = "") -> Measurement:
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
    a = [w.ttft_p50 for w in first if w.ttft_p50 is not None]
    b = [w.ttft_p50 for w in last if w.ttft_p50 is not None]
    if not a or not b:
        return Measurement.error(name, f"no TTFT in the {'first' if not a else 'last'} span "
                                       f"({note})", limit)
    early, late = statistics.median(a), statistics.median(b)
    # Both directions count: a soak's point is that the operating point does not move.
    drift = (late - early) / early * 100
    blocks = [[w for w in s if w.ttft_p50 is not None] for s in spans(windows)[0]]
    blocks = [s for s in blocks if s]
    if sum(map(len, blocks)) < 2:
        return Measurement.error(name, f"{sum(map(len, blocks))} window with a TTFT after the "
                                       "warm-up: a drift needs two or more", limit)
    compared = {w.index for w in first + last}
    noise = noise_of([[w.ttft_p50 or 0.0 for w in s] for s in blocks], leave_out=[
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
    return measured


def stability(windows: list[WindowRecord], spread_max: float = 20.0, slope_max: float = 10.0,
              keys: tuple[str, str] = ("g1.steady_state_spread_max",
                                       "g1.steady_state_slope_max"),
              confidence: float = 0.95) -> list[Measurement]:
    """SNIA spread and slope over 5 rounds of per-window throughput (core.steady arithmetic).

    Each round's mean carries the windows' noise over the root of its windows; the spread's
    interval holds all five rounds at once (Bonferroni), the slope's is the least-squares
    slope's own. A figure noise can explain is MARGINAL, never a PASS nor a FAIL.
    """
    names = (G4["g4.window_spread"].title, G4["g4.window_slope"].title)
    limits = (Limit.at_most(spread_max, "%", key=keys[0]), Limit.at_most(slope_max, "%",
                                                                         key=keys[1]))
    rates = [w.throughput or 0.0 for w in windows]
    try:
        rounds = round_averages(rates)
        mean = sum(rounds) / len(rounds)
        if mean <= 0:
            raise SteadyStateUnavailable("no output throughput in any window (mean 0)")
    except SteadyStateUnavailable as exc:
        return [Measurement.error(n, str(exc), lim) for n, lim in zip(names, limits, strict=True)]
    k, size = len(rounds), len(rates) // len(rounds)
    # A window without output has no log noise; it FAILs the floor, and here stays a point.
    noise = window_noise(rates) if min(rates) > 0 else 0.0
    per_round = noise / math.sqrt(size) * 100  # one round mean's relative noise, %
    spread = (max(rounds) - min(rounds)) / mean * 100
    spread_half = 2 * quantile(1 - (1 - confidence) / k, len(rates)) * per_round
    slope = least_squares_slope(rounds) * (k - 1) / mean * 100
    slope_half = quantile(confidence, len(rates)) * per_round * (k - 1) / math.sqrt(
        sum((i - (k - 1) / 2) ** 2 for i in range(k)))
    ends = (abs(slope - slope_half), abs(slope + slope_half))
    slope_interval = (0.0 if abs(slope) <= slope_half else min(ends), max(ends))
    evidence = [f"round averages (tok/s, {size} windows each): "
                f"{', '.join(f'{r:.4g}' for r in rounds)}",
                f"window-to-window noise of the throughput: {noise * 100:.3g} %; one round's "
                f"mean: {per_round:.3g} %"]
    judged = [Measurement.measured(names[0], spread, limits[0], evidence=evidence,
                                   interval=(max(0.0, spread - spread_half),
                                             spread + spread_half)),
              Measurement.measured(names[1], abs(slope), limits[1], evidence=evidence,
                                   interval=slope_interval)]
    return [m if m.outcome is not Outcome.MARGINAL else m.model_copy(update={"note": (
        f"its {confidence * 100:g} % interval [{m.interval[0]:.3g}, {m.interval[1]:.3g}] % "
        f"crosses {m.limit.hi:g} %: rounds of {size} window{'s' if size > 1 else ''} at "
        f"{noise * 100:.3g} % window-to-window noise cannot tell; longer rounds (a longer "
        "soak) decide")}) for m in judged]
