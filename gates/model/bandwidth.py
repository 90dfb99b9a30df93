"""Bandwidth → TTFT: restore time, break-even, prediction, calibration, G1 pre-flight. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from .kv import chunking, fmt_bytes, fmt_tokens, kv_geometry
from .spec import ModelSpec

# The seed's parallel-read test (R1: Qwen2.5-32B, one GPU, concurrency 16, cold reads):
# KV read bandwidth 0.98 → 5.23 GB/s took TTFT p50 37.97 → 9.30 s. Context only; never
# an expected answer.
SEED_POINTS = ((0.98e9, 37.97), (5.23e9, 9.30))
SEED_BASELINE_BPS = 0.98e9
SEED_BASELINE_LABEL = "0.98 GB/s (the seed's KV read path before its parallel-read patch)"


class ModelInputError(ValueError):
    """Inputs the bandwidth model cannot use (no bandwidth, too few calibration points …)."""


def fmt_rate(bps: float) -> str:
    """Bandwidth for people: 5.2e9 -> "5.2 GB/s"."""
    return f"{bps / 1e9:.3g} GB/s" if bps >= 1e8 else f"{bps / 1e6:.3g} MB/s"


class RestoreModel(BaseModel):
    """How KV bytes and read bandwidth turn into TTFT; the defaults are the ideal case."""

    model_config = ConfigDict(frozen=True)

    # Share of the measured (fio) read bandwidth that a KV restore achieves.
    efficiency: float = Field(default=1.0, gt=0)
    # Fixed time per restore: lookups, file opens, first-chunk latency.
    overhead_s: float = Field(default=0.0, ge=0)
    # The rest of TTFT: queueing, prefill of the uncached suffix, the first decode step.
    other_s: float = Field(default=0.0, ge=0)
    # Restores sharing the read bandwidth at once (a closed loop's requests arrive together).
    concurrent_restores: int = Field(default=1, ge=1)

    def restore_s(self, kv_bytes: float, read_bps: float) -> float:
        """Seconds to restore kv_bytes while sharing read_bps with the other restores."""
        return restore_time(kv_bytes * self.concurrent_restores, read_bps, self.efficiency,
                            self.overhead_s)

    def ttft_s(self, kv_bytes: float, read_bps: float) -> float:
        """Predicted TTFT: the other part plus the restore."""
        return self.other_s + self.restore_s(kv_bytes, read_bps)

    def assumptions(self) -> list[str]:
        """The model's assumptions in words, for reports and tables."""
        ideal = self.efficiency == 1 and self.overhead_s == 0 and self.other_s == 0
        out = [f"restore time = {self.overhead_s:g} s + KV bytes × {self.concurrent_restores} "
               f"concurrent restore(s) / ({self.efficiency:g} × read bandwidth)",
               f"the rest of TTFT (queueing, prefill of uncached tokens, first decode step) "
               f"is {self.other_s:g} s and does not depend on bandwidth",
               "the whole context's KV is read from the tier (a full prefix hit)"]
        if ideal:
            out.append("ideal case (efficiency 1, no overhead): restore time is a lower bound "
                       "and TTFT reduction an upper bound; calibrate from a G3 run")
        return out


def restore_time(kv_bytes: float, read_bps: float, efficiency: float = 1.0,
                 overhead_s: float = 0.0) -> float:
    """Seconds to read kv_bytes: overhead + kv_bytes / (efficiency × read_bps)."""
    if read_bps <= 0 or efficiency <= 0 or kv_bytes < 0:
        raise ModelInputError("read bandwidth and efficiency must be > 0, KV bytes >= 0")
    return overhead_s + kv_bytes / (efficiency * read_bps)


def recompute_time(tokens: int, prefill_tokens_per_s: float) -> float:
    """Seconds to recompute the KV of tokens at a flat prefill rate."""
    if prefill_tokens_per_s <= 0:
        raise ModelInputError("prefill rate must be > 0 tokens/s")
    # Attention makes long prefills slower than linear, so this flatters recompute and
    # the break-even bandwidth below errs high (the safe side for a buyer).
    return tokens / prefill_tokens_per_s


def break_even_bandwidth(kv_bytes: float, recompute_s: float, efficiency: float = 1.0,
                         overhead_s: float = 0.0) -> float:
    """Read bandwidth at which restoring equals recomputing; inf if overhead alone is slower."""
    if recompute_s <= overhead_s:
        return math.inf
    return kv_bytes / (efficiency * (recompute_s - overhead_s))


class Prediction(BaseModel):
    """Predicted TTFT at a read bandwidth, and the gain against a baseline."""

    kv_bytes: float
    read_bps: float
    restore_s: float
    ttft_s: float
    baseline: str | None
    baseline_ttft_s: float | None
    ttft_reduction: float | None  # fraction, 0.25 = 25 % lower TTFT
    throughput_gain: float | None  # fraction, 0.29 = +29 % output throughput
    break_even_bps: float | None
    assumptions: list[str]


def predict(kv_bytes: float, read_bps: float, model: RestoreModel | None = None, *,
            baseline_bps: float | None = None, baseline_label: str | None = None,
            recompute_s: float | None = None, decode_s: float = 0.0) -> Prediction:
    """TTFT at read_bps, and reduction/throughput gain vs a baseline bandwidth or recompute."""
    model = model or RestoreModel()
    ttft = model.ttft_s(kv_bytes, read_bps)
    assumptions = model.assumptions()
    base, label = None, None
    if baseline_bps is not None:
        base = model.ttft_s(kv_bytes, baseline_bps)
        label = baseline_label or f"{fmt_rate(baseline_bps)} baseline"
    elif recompute_s is not None:
        base, label = model.other_s + recompute_s, baseline_label or "recompute"
    reduction = gain = None
    if base is not None and base > 0:
        reduction = 1 - ttft / base
        # Closed loop at fixed concurrency: throughput ∝ 1 / (TTFT + decode time).
        gain = (base + decode_s) / (ttft + decode_s) - 1
        assumptions.append(f"throughput ∝ 1/(TTFT + {decode_s:g} s decode) at fixed concurrency"
                           + ("; decode time 0 makes the gain an upper bound"
                              if decode_s == 0 else ""))
    even = None
    if recompute_s is not None:
        even = break_even_bandwidth(kv_bytes * model.concurrent_restores, recompute_s,
                                    model.efficiency, model.overhead_s)
        assumptions.append(f"recompute takes {recompute_s:.3g} s at a flat prefill rate")
    return Prediction(kv_bytes=kv_bytes, read_bps=read_bps,
                      restore_s=model.restore_s(kv_bytes, read_bps), ttft_s=ttft,
                      baseline=label, baseline_ttft_s=base, ttft_reduction=reduction,
                      throughput_gain=gain, break_even_bps=even, assumptions=assumptions)


class Calibration(BaseModel):
    """TTFT = a + b / bandwidth, least-squares over measured (bandwidth, TTFT) points."""

    a_s: float  # fixed part of TTFT: overhead + everything that does not read KV
    b_bytes: float  # bytes read per request at efficiency 1, × concurrent restores
    points: int
    rmse_s: float
    r2: float | None  # None for two points: the line passes through both exactly
    kv_bytes: float | None = None
    efficiency: float | None = None  # kv_bytes × concurrent restores / b, when kv_bytes is known

    @property
    def shape_ok(self) -> bool:
        """Whether the data have the model's shape: a fixed part >= 0 and a bandwidth part > 0."""
        return self.a_s >= 0 and self.b_bytes > 0

    def ttft(self, read_bps: float) -> float:
        """The fitted TTFT at a read bandwidth."""
        return self.a_s + self.b_bytes / read_bps

    def restore_model(self, concurrent_restores: int = 1) -> RestoreModel:
        """The RestoreModel this fit implies (a goes to other_s: one fit cannot split it)."""
        if not self.shape_ok or self.efficiency is None:
            raise ModelInputError("the fit gives no usable efficiency (needs kv_bytes, a >= 0, "
                                  "b > 0)")
        return RestoreModel(efficiency=self.efficiency, other_s=self.a_s,
                            concurrent_restores=concurrent_restores)


def fit_calibration(points: Iterable[tuple[float, float]], kv_bytes: float | None = None,
                    concurrent_restores: int = 1) -> Calibration:
    """Least-squares fit of TTFT = a + b/bandwidth to (read B/s, TTFT s) points."""
    pts = [(float(bw), float(t)) for bw, t in points]
    if any(not (math.isfinite(bw) and bw > 0 and math.isfinite(t) and t >= 0) for bw, t in pts):
        raise ModelInputError("every point needs a bandwidth > 0 and a TTFT >= 0")
    # GB/s internally keeps x = 1/bandwidth near 1 instead of 1e-9.
    xs = [1e9 / bw for bw, _ in pts]
    ys = [t for _, t in pts]
    if len(xs) < 2 or max(xs) - min(xs) <= 1e-6 * max(xs):
        # Points at one bandwidth (to a part in a million) say nothing about the slope.
        raise ModelInputError(f"calibration needs two or more distinct bandwidths, got "
                              f"{len(pts)} point(s) at {fmt_rate(min(pts)[0]) if pts else 'none'}"
                              + ("" if len(pts) < 2 else f" … {fmt_rate(max(pts)[0])}"))
    n = len(pts)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    a = my - b * mx
    residuals = [y - (a + b * x) for x, y in zip(xs, ys, strict=True)]
    sse = sum(r * r for r in residuals)
    syy = sum((y - my) ** 2 for y in ys)
    r2 = None if n == 2 else (1 - sse / syy if syy > 0 else 1.0)
    eff = kv_bytes * concurrent_restores / (b * 1e9) if kv_bytes and b > 0 else None
    return Calibration(a_s=a, b_bytes=b * 1e9, points=n, rmse_s=math.sqrt(sse / n), r2=r2,
                       kv_bytes=kv_bytes, efficiency=eff)


class Preflight(BaseModel):
    """The G1 → G3 pre-flight: what the measured read bandwidth means for TTFT."""

    measured_read_bps: float
    model: str
    dtype: str
    tp: int
    context_tokens: int
    kv_bytes: int
    chunk_file_bytes: int
    prediction: Prediction

    @property
    def assumptions(self) -> list[str]:
        """The assumptions behind the numbers, one sentence each."""
        return self.prediction.assumptions

    def sentence(self) -> str:
        """One line for the G1 report."""
        p = self.prediction
        text = (f"at {fmt_rate(self.measured_read_bps)} measured, a "
                f"{fmt_tokens(self.context_tokens)}-token context of {self.model} "
                f"({self.dtype.upper()}, TP{self.tp}: {fmt_bytes(self.kv_bytes)} of KV) restores "
                f"in ~{p.restore_s:.2g} s")
        if p.ttft_reduction is None:
            return text + "; no TTFT reduction estimate without a baseline"
        return text + f"; expected TTFT reduction ~{p.ttft_reduction * 100:.0f} % vs {p.baseline}"

    def versus_measured(self, measured_ttft_reduction: float) -> str:
        """Predicted vs measured TTFT reduction (fractions), for the G3 report."""
        if self.prediction.ttft_reduction is None:
            return f"measured TTFT reduction {measured_ttft_reduction * 100:.0f} % (no prediction)"
        gap = (measured_ttft_reduction - self.prediction.ttft_reduction) * 100
        return (f"predicted TTFT reduction {self.prediction.ttft_reduction * 100:.0f} %, "
                f"measured {measured_ttft_reduction * 100:.0f} % ({gap:+.0f} points)")


def preflight(measured_read_bps: float, model: str | ModelSpec, context_tokens: int,
              dtype: str = "fp8", tp: int = 1, baseline_bps: float | None = None, *,
              baseline_label: str | None = None, prefill_tokens_per_s: float | None = None,
              restore: RestoreModel | None = None, decode_s: float = 0.0,
              chunk_tokens: int = 256) -> Preflight:
    """Expected G3 gain from G1's measured read bandwidth (baseline: given, recompute, or seed)."""
    geometry = kv_geometry(model, dtype, tp)
    kv = context_tokens * geometry.stored_bytes_per_token
    recompute = (recompute_time(context_tokens, prefill_tokens_per_s)
                 if prefill_tokens_per_s else None)
    if baseline_bps is None and recompute is None:
        baseline_bps, baseline_label = SEED_BASELINE_BPS, SEED_BASELINE_LABEL
    prediction = predict(kv, measured_read_bps, restore, baseline_bps=baseline_bps,
                         baseline_label=baseline_label, recompute_s=recompute, decode_s=decode_s)
    return Preflight(measured_read_bps=measured_read_bps, model=geometry.model,
                     dtype=geometry.dtype, tp=tp, context_tokens=context_tokens, kv_bytes=kv,
                     chunk_file_bytes=chunking(geometry, context_tokens, chunk_tokens)
                     .chunk_file_bytes, prediction=prediction)
