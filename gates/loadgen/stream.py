"""One streamed response as it arrives: its events stamped on arrival, then classified.

Pure: the load generator feeds it bytes with their arrival times (DESIGN §5: stamped when the
bytes arrive, before JSON parsing).
"""

from __future__ import annotations

import json

from .chunks import classify
from .logprobs import TopK
from .sse import SSEDecoder, SSEProtocolError

STAMP = "sim_sent_ns"  # the simulator stamps each event just before writing it


def _stamp_lag(data: str, arrived_ns: int) -> float | None:
    """Arrival minus the simulator's send stamp of an event, in seconds (timing fidelity)."""
    try:
        return (arrived_ns - int(json.loads(data)[STAMP])) / 1e9
    except (ValueError, KeyError, TypeError):
        return None


class ResponseStream:
    """Accumulates one response's events; times are ns since t0."""

    def __init__(self, t0_ns: int = 0) -> None:
        self.t0_ns = t0_ns
        self.stamp_lag: float | None = None
        self.decoder = SSEDecoder()
        self.content_ns: list[int] = []
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.top_logprobs: list[TopK] = []  # one per logprob: () where none was sent
        self.usage = None
        self.done = False

    def feed(self, data: bytes, elapsed_ns: int) -> None:
        """Take a chunk of the response body as it arrived, elapsed_ns after t0."""
        for event in self.decoder.feed(data):
            self._event(event.data, elapsed_ns)

    def _event(self, data: str, elapsed_ns: int) -> None:
        chunk = classify(data)
        if chunk.kind == "error":
            raise SSEProtocolError(f"server sent an error event: {chunk.error}")
        if chunk.kind == "done":
            self.done = True
        if chunk.kind == "content":
            if not self.content_ns and STAMP in data:
                self.stamp_lag = _stamp_lag(data, self.t0_ns + elapsed_ns)
            self.content_ns.append(elapsed_ns)
            self.ids.extend(chunk.token_ids or [])
            self.logprobs.extend(chunk.logprobs or [])
            self.top_logprobs.extend(chunk.top_logprobs or [])
        if chunk.usage is not None:
            self.usage = chunk.usage
