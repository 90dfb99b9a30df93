"""One inference request as the load generator saw it (DESIGN §5). Pure data."""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field


class RequestOutcome(enum.StrEnum):
    """How a request ended; every request sent ends as exactly one of these."""

    OK = "ok"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    PROTOCOL_ERROR = "protocol_error"
    CANCELLED = "cancelled"


class RequestRecord(BaseModel):
    """Times are seconds (from perf_counter_ns) relative to the phase's dispatch start."""

    model_config = ConfigDict(allow_inf_nan=False)

    request_id: str
    phase: str = "probe"  # e.g. warmup, seed, probe, window-0007
    warmup: bool = False
    endpoint: str = ""
    t0: float  # just before the POST
    queue_time: float = 0.0  # waiting for a concurrency slot, before t0
    ttft: float | None = None  # first content event - t0
    e2e: float | None = None  # last content event - t0
    content_times: list[float] = Field(default_factory=list)  # each content event - t0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_from_usage: bool = False  # False: counted content events instead
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, if sent
    output_ids: list[int] = Field(default_factory=list)  # token ids, when the server sends them
    output_logprobs: list[float] = Field(default_factory=list)  # each output token's logprob
    # Each output token's top-k (token id, logprob), best first, one per logprob; [] where the
    # server named none by id (gates.loadgen.logprobs).
    output_top_logprobs: list[list[tuple[int, float]]] = Field(default_factory=list)
    outcome: RequestOutcome = RequestOutcome.OK
    status: int | None = None  # HTTP status
    error: str = ""
    # Times the request was sent again because the server had closed the kept-alive connection
    # before any byte of a response (gates.loadgen.pool); t0 stays the first send's.
    reconnects: int = 0
    # First content event's arrival minus the server's send stamp (simulator only), seconds.
    stamp_lag: float | None = None

    @property
    def ok(self) -> bool:
        """Whether the request completed normally."""
        return self.outcome is RequestOutcome.OK

    @property
    def counted(self) -> bool:
        """Whether the request belongs in latency statistics: ok and not warm-up."""
        return self.ok and not self.warmup
