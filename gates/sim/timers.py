"""An event loop whose timers fire within tens of microseconds of their time, not up to 1 ms late.

epoll_wait takes its timeout in whole milliseconds and Python's EpollSelector rounds it up, so
every asyncio.sleep ends 0-1 ms late (0.65 ms at the median, measured by
bench/sim_scheduling.py): for a simulator whose token times are its output that is error it
adds itself. select(2) takes microseconds, so a timed wait sleeps there on the epoll file
descriptor (readable when any registered descriptor is) and then collects the events without
waiting.
"""

from __future__ import annotations

import asyncio
import select
import selectors

FD_SETSIZE = 1024  # select(2) cannot watch a descriptor numbered at or above this


class FineTimerSelector(selectors.EpollSelector):
    """EpollSelector whose timed waits wake on time to the microsecond."""

    def select(self, timeout: float | None = None) -> list:
        """Wait up to timeout seconds (None: until an event) and return the ready keys."""
        fd = self._selector.fileno()
        if timeout is not None and timeout > 0 and fd < FD_SETSIZE:
            select.select([fd], [], [], timeout)
            timeout = 0
        return super().select(timeout)


def fine_loop() -> asyncio.AbstractEventLoop:
    """A new event loop with microsecond timers where epoll exists, else the default one."""
    if not hasattr(selectors, "EpollSelector"):
        return asyncio.new_event_loop()
    return asyncio.SelectorEventLoop(FineTimerSelector())
