"""Steady state the SNIA way, recomputed from fio's ``steadystate.data``. Pure."""

from __future__ import annotations

from pydantic import BaseModel

ROUNDS = 5


class SteadyState(BaseModel):
    """The SNIA verdict on one measurement window: spread and slope of 5 round averages."""

    rounds: list[float]
    mean: float
    spread_pct: float  # (max - min) of the round averages, % of their mean
    slope_pct: float  # excursion of the least-squares line across the window, % of mean
    fio_attained: bool
    fio_criterion: str = ""

    def describe(self) -> str:
        """One line for a report: what fio said and what the SNIA rules say."""
        fio = "attained" if self.fio_attained else "NOT attained"
        return (f"fio steady state {fio} ({self.fio_criterion}); SNIA over {len(self.rounds)} "
                f"rounds: spread {self.spread_pct:.1f} %, slope {self.slope_pct:.1f} %")


class SteadyStateUnavailable(ValueError):
    """The window is too short (or empty) to judge steady state."""


def round_averages(data: list[float], rounds: int = ROUNDS) -> list[float]:
    """Split per-second samples into ``rounds`` consecutive equal rounds and average each."""
    if len(data) < rounds:
        raise SteadyStateUnavailable(
            f"steady-state window has {len(data)} samples; the SNIA rules need {rounds} rounds")
    size = len(data) // rounds
    tail = data[len(data) - size * rounds:]  # the newest samples make the window
    return [sum(tail[i * size:(i + 1) * size]) / size for i in range(rounds)]


def least_squares_slope(values: list[float]) -> float:
    """Slope of the least-squares line through (i, values[i])."""
    n = len(values)
    if n < 2:
        return 0.0  # one point (or none) has no trend
    mean_x = (n - 1) / 2
    mean_y = sum(values) / n
    sxx = sum((i - mean_x) ** 2 for i in range(n))
    sxy = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(values))
    return sxy / sxx if sxx else 0.0


def snia_steady_state(data: list[float], fio_attained: bool = False,
                      fio_criterion: str = "") -> SteadyState:
    """Both SNIA rules over the window: spread (max - min) and slope excursion, as % of mean."""
    if not fio_attained and data and data[-1] == 0 and any(data):
        # fio fills its window one sample per second; trailing zeros are slots never filled.
        raise SteadyStateUnavailable("the job ended before fio filled its steady-state window "
                                     "(site.toml [fio] runtime must exceed ramp + window)")
    rounds = round_averages(data)
    mean = sum(rounds) / len(rounds)
    if mean <= 0:
        raise SteadyStateUnavailable("steady-state window has no I/O (mean 0)")
    spread = (max(rounds) - min(rounds)) / mean * 100
    slope = abs(least_squares_slope(rounds)) * (len(rounds) - 1) / mean * 100
    return SteadyState(rounds=rounds, mean=mean, spread_pct=spread, slope_pct=slope,
                       fio_attained=fio_attained, fio_criterion=fio_criterion)
