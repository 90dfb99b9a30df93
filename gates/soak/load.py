"""The soak's load: the LoadDriver seam, and the real one driving endpoints with sessions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from ..core.verdicts import RequestRecord
from ..loadgen import Endpoint, LoadSettings, Plan, PlannedRequest, Pool, send
from ..proof import ServerIdentity, server_identity


class LoadDriver(Protocol):
    """Keeps the operating point loaded for ``seconds``; returns every finished request."""

    def run(self, index: int, seconds: float) -> list[RequestRecord]: ...


class EndpointLoad:
    """Closed loop at the operating point: ``concurrency`` workers, each sending one session's
    turns in order (turn n after turn n-1 finished), then the next session, until the window's
    time is up. ``plans(cycle)`` gives each pass over the sessions fresh prompts, so the KV tier
    keeps being written as well as read; a fixed Plan repeats (reads only, after the first)."""

    def __init__(self, endpoints: Sequence[Endpoint], plans: Plan | Callable[[int], Plan],
                 settings: LoadSettings):
        self.endpoints, self.settings = list(endpoints), settings
        self.plans = plans if callable(plans) else (lambda cycle: plans)
        self.cycle, self.queue = 0, []

    def identity(self) -> ServerIdentity:
        """What the soak's server says it is (its own word, never the site file's engine =)."""
        first = self.endpoints[0]
        key = first.api_key.get_secret_value() if first.api_key else ""
        return asyncio.run(server_identity(first.url, key))

    def _next_session(self) -> list[PlannedRequest]:
        if not self.queue:
            plan = self.plans(self.cycle)
            self.cycle += 1
            groups: dict[str, list[PlannedRequest]] = {}
            for r in plan.requests:
                groups.setdefault(r.session or r.request_id, []).append(r)
            self.queue = [sorted(g, key=lambda r: r.turn or 0) for g in groups.values()]
        return self.queue.pop(0)

    def run(self, index: int, seconds: float) -> list[RequestRecord]:
        """Requests until ``seconds`` have passed; in-flight ones are let finish."""
        return asyncio.run(self._window(seconds))

    async def _window(self, seconds: float) -> list[RequestRecord]:
        records: list[RequestRecord] = []
        deadline = time.monotonic() + seconds
        # The load generator's pool: a request on a connection the server had closed is sent
        # once more on a fresh one, so a server's keep-alive limit is not a soak error.
        async with Pool() as http:
            origin = time.perf_counter_ns()

            async def worker(k: int) -> None:
                while time.monotonic() < deadline:
                    for turn in self._next_session():
                        if time.monotonic() >= deadline:
                            return  # the rest of this session is abandoned, not half-sent
                        endpoint = self.endpoints[k % len(self.endpoints)]
                        records.append(await send(http, endpoint, turn, self.settings, origin))

            await asyncio.gather(*(worker(k) for k in range(self.settings.concurrency)))
        return records
