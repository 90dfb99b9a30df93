"""Load metrics over request records, named and defined exactly as DESIGN §5. Pure: no I/O.

Seconds in, seconds out; the report layer converts. Records are one phase's: their times
share that phase's dispatch start.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core.statistics import interpolate
from ..core.verdicts import RequestOutcome, RequestRecord

Row = tuple[str, float | int | None, str]


class Stats(BaseModel):
    """Count, mean and percentiles of one metric; all None when there were no values."""

    model_config = ConfigDict(frozen=True)

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


def stats(values: Iterable[float | None]) -> Stats:
    """Stats of the values, skipping None (a request the metric does not apply to)."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return Stats()
    if any(map(math.isnan, xs)):
        raise ValueError("cannot summarize NaN")
    # fsum: no drift over a million values; the clamp: n equal values average to that value.
    mean = min(max(math.fsum(xs) / len(xs), xs[0]), xs[-1])
    return Stats(n=len(xs), mean=mean, p50=interpolate(xs, 50), p90=interpolate(xs, 90),
                 p99=interpolate(xs, 99))


def ttft(r: RequestRecord) -> float | None:
    """Time to first token: first content event - t0."""
    return r.ttft if r.ttft is not None else (r.content_times[0] if r.content_times else None)


def e2e(r: RequestRecord) -> float | None:
    """End-to-end latency: last content event - t0."""
    return r.e2e if r.e2e is not None else (r.content_times[-1] if r.content_times else None)


def tpot(r: RequestRecord) -> float | None:
    """TPOT (vLLM) = ITL (aiperf) = (E2E - TTFT) / (output tokens - 1); None below 2 tokens."""
    first, last = ttft(r), e2e(r)
    if first is None or last is None or r.output_tokens < 2:
        return None
    return (last - first) / (r.output_tokens - 1)


def chunk_gaps(r: RequestRecord) -> list[float]:
    """The gaps between consecutive content events of one request."""
    times = r.content_times
    return [b - a for a, b in zip(times, times[1:], strict=False)]


class SLO(BaseModel):
    """Service-level objectives a request must all meet to count toward goodput (seconds)."""

    model_config = ConfigDict(frozen=True)

    max_ttft: float | None = Field(default=None, gt=0)
    max_tpot: float | None = Field(default=None, gt=0)
    max_e2e: float | None = Field(default=None, gt=0)

    def met_by(self, r: RequestRecord) -> bool:
        """Whether a completed request met every objective that is set."""
        per_token = tpot(r)
        return (r.ok
                and _within(ttft(r), self.max_ttft)
                and _within(e2e(r), self.max_e2e)
                # As vllm bench serve: a one-token request has no TPOT to miss.
                and (per_token is None or _within(per_token, self.max_tpot)))


def _within(value: float | None, limit: float | None) -> bool:
    return limit is None or (value is not None and value <= limit)


def _per_second(n: float, duration: float | None) -> float | None:
    return n / duration if duration is not None and duration > 0 else None


def _all_outcomes(records: list[RequestRecord]) -> dict[RequestOutcome, int]:
    counts = Counter(r.outcome for r in records)
    return {o: counts[o] for o in RequestOutcome}


class LoadSummary(BaseModel):
    """Every DESIGN §5 load metric of one phase; warm-up requests are counted, never timed."""

    sent: int  # requests sent, warm-up excluded
    outcomes: dict[RequestOutcome, int]  # adds up to sent
    warmup_sent: int = 0
    warmup_outcomes: dict[RequestOutcome, int] = Field(default_factory=dict)
    error_rate: float | None = None  # not ok / sent, warm-up excluded
    ok_without_content: int = 0  # ok, yet no content event: no TTFT or E2E to time
    tokens_from_events: int = 0  # ok requests whose output tokens are counted events
    input_tokens: int = 0  # of the ok, non-warm-up requests
    output_tokens: int = 0
    ttft: Stats = Stats()
    tpot: Stats = Stats()  # = ITL; over requests with at least 2 output tokens
    inter_chunk: Stats = Stats()  # pooled gaps between consecutive content events
    e2e: Stats = Stats()
    span: float | None = None  # first t0 of any request -> last content event of an ok one
    wall: float  # dispatch start -> all done, as the caller measured it
    output_throughput_span: float | None = None  # tokens/s
    output_throughput_wall: float | None = None
    request_throughput_span: float | None = None  # requests/s
    request_throughput_wall: float | None = None
    slo: SLO | None = None
    good: int | None = None  # requests meeting every objective of the SLO
    goodput_fraction: float | None = None  # good / sent
    goodput: float | None = None  # good requests/s over wall

    @model_validator(mode="after")
    def _counts_add_up(self) -> LoadSummary:
        for name, total, counts in (("", self.sent, self.outcomes),
                                    ("warm-up ", self.warmup_sent, self.warmup_outcomes)):
            if sum(counts.values()) != total:
                raise ValueError(f"{name}outcome counts {dict(counts)} do not add up to the "
                                 f"{total} {name}requests sent")
        return self

    @property
    def itl(self) -> Stats:
        """ITL, aiperf's name for what vLLM calls TPOT: the same numbers."""
        return self.tpot

    @property
    def tokens_estimated(self) -> bool:
        """Whether any output token count came from counting events instead of usage."""
        return self.tokens_from_events > 0

    def table_rows(self) -> list[Row]:
        """(metric, value, unit) rows for a CLI table; times in seconds."""
        rows: list[Row] = [("requests sent", self.sent, "")]
        rows += [(f"  {o.value}", n, "") for o, n in self.outcomes.items()]
        rows += [("warm-up requests", self.warmup_sent, ""),
                 ("error rate", _percent(self.error_rate), "%"),
                 ("input tokens", self.input_tokens, "tok"),
                 ("output tokens", self.output_tokens, "tok"),
                 ("  counted from events, not usage", self.tokens_from_events, "req")]
        if self.ok_without_content:
            rows.append(("ok without any content", self.ok_without_content, "req"))
        for name, s in (("TTFT", self.ttft), ("TPOT (= ITL)", self.tpot),
                        ("inter-chunk latency", self.inter_chunk), ("E2E latency", self.e2e)):
            rows += [(f"{name} {k}", getattr(s, k), "s") for k in ("mean", "p50", "p90", "p99")]
        rows += [("duration (span)", self.span, "s"), ("duration (wall)", self.wall, "s"),
                 ("output throughput (span)", self.output_throughput_span, "tok/s"),
                 ("output throughput (wall)", self.output_throughput_wall, "tok/s"),
                 ("request throughput (span)", self.request_throughput_span, "req/s"),
                 ("request throughput (wall)", self.request_throughput_wall, "req/s")]
        if self.slo is not None:
            rows += [("requests meeting the SLO", self.good, "req"),
                     ("goodput fraction", _percent(self.goodput_fraction), "%"),
                     ("goodput", self.goodput, "req/s")]
        return rows


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


def summarize(records: Iterable[RequestRecord], wall: float,
              slo: SLO | None = None) -> LoadSummary:
    """Every DESIGN §5 metric over one phase's records; wall: dispatch start -> all done."""
    if not (math.isfinite(wall) and wall >= 0):
        raise ValueError(f"wall duration {wall} is not a finite number of seconds >= 0")
    records = list(records)
    measured = [r for r in records if not r.warmup]
    warmup = [r for r in records if r.warmup]
    done = [r for r in measured if r.counted]  # ok and not warm-up: the only ones timed
    ends = [r.t0 + last for r in done if (last := e2e(r)) is not None]
    span = max(ends) - min(r.t0 for r in measured) if ends else None
    tokens = sum(r.output_tokens for r in done)
    good = sum(slo.met_by(r) for r in done) if slo is not None else None
    return LoadSummary(
        sent=len(measured),
        outcomes=_all_outcomes(measured),
        warmup_sent=len(warmup),
        warmup_outcomes=_all_outcomes(warmup),
        error_rate=(len(measured) - len(done)) / len(measured) if measured else None,
        ok_without_content=sum(ttft(r) is None for r in done),
        tokens_from_events=sum(not r.tokens_from_usage for r in done),
        input_tokens=sum(r.input_tokens for r in done),
        output_tokens=tokens,
        ttft=stats(ttft(r) for r in done),
        tpot=stats(tpot(r) for r in done),
        inter_chunk=stats(g for r in done for g in chunk_gaps(r)),
        e2e=stats(e2e(r) for r in done),
        span=span,
        wall=wall,
        output_throughput_span=_per_second(tokens, span),
        output_throughput_wall=_per_second(tokens, wall),
        request_throughput_span=_per_second(len(done), span),
        request_throughput_wall=_per_second(len(done), wall),
        slo=slo,
        good=good,
        goodput_fraction=good / len(measured) if good is not None and measured else None,
        goodput=_per_second(good, wall) if good is not None else None,
    )
