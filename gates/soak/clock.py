"""The soak runner's clocks: the wall clock (epoch seconds) and a fake one for tests."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Seconds since the epoch, and a way to wait."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The wall clock: epoch seconds, so windows line up with kernel log timestamps."""

    def now(self) -> float:
        """time.time()."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """time.sleep()."""
        time.sleep(seconds)


class FakeClock:
    """Test double: time moves only when someone sleeps or advances it."""

    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def now(self) -> float:
        """The fake time."""
        return self.t

    def sleep(self, seconds: float) -> None:
        """Advance the fake time."""
        self.t += max(0.0, seconds)
