"""Which noise a span comparison's interval is read from, and what the evidence says of it. Pure.

Where the spans besides those compared give ROBUST_FROM differences or more (a soak of 12 h or
more, 13 for a floor span in the middle; spans of an hour), the long-run noise of span medians
(gates.soak.longrun), which holds when a slow state outlasts a window. Below that, too few
spans are left to read it robustly (a step of the array sits in most of their differences), and
the interval is the window-to-window one it always was (gates.soak.spans), which assumes
independent windows: the evidence says so, and bench/soak_risk.py --ar measures what that
costs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .longrun import ROBUST_FROM, SpanNoise, half_width, span_noise, windows_for
from .spans import quantile, span_variance, window_noise, windows_to_decide


@dataclass(frozen=True)
class Noise:
    """The noise behind one comparison: of span medians (span set) or of windows (window)."""

    span: SpanNoise | None
    window: float  # window-to-window log noise (used where span is None)
    windows: int  # how many windows it came from

    @property
    def per_window(self) -> float:
        """One window's noise (log), as the note states it."""
        return self.span.per_window if self.span else self.window

    def half(self, sizes: Sequence[int], level: float) -> float:
        """Half-width (log) of a difference of span medians of these sizes."""
        if self.span:
            return half_width(self.span, sizes, level)
        return quantile(level, self.windows) * self.window * math.sqrt(
            math.fsum(span_variance(n) for n in sizes))

    def need(self, room: float, confidence: float) -> int | None:
        """Windows per span that would decide (None: none would)."""
        if self.span:
            return windows_for(self.span, room, confidence)
        return windows_to_decide(self.window, room, confidence)

    def said(self, what: str) -> str:
        """The evidence line: which noise, from what."""
        if self.span:
            s = self.span
            return (f"long-run noise of one window's {what}: {s.per_window * 100:.3g} %, from "
                    f"the medians of {s.spans} spans {s.lag} apart, those compared left out "
                    f"({s.df:.3g} degrees of freedom; a span of n windows: that over the root "
                    "of n, however alike neighbouring windows are)")
        return (f"window-to-window noise of the {what}: {self.window * 100:.3g} % over "
                f"{self.windows} windows (too few spans to read a long-run noise robustly: "
                "this assumes independent windows)")


def noise_of(spans: Sequence[Sequence[float]], leave_out: Sequence[int]) -> Noise:
    """The noise a comparison of these spans (leave_out: those compared) is read from."""
    series = [v for s in spans for v in s]
    read = span_noise(spans, leave_out)
    if read.differences >= ROBUST_FROM:
        return Noise(span=read, window=0.0, windows=len(series))
    return Noise(span=None, window=window_noise(series), windows=len(series))
