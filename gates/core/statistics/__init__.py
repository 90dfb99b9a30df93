"""The statistics room of the core: percentiles and CV, the paired interval and its
sequential plan (alpha spending), the SNIA steady state. Pure."""

from .paired import (
    LookPlan,
    Sequential,
    log_ratios,
    looks_problem,
    pairs_needed,
    pass_probability,
    sequential,
)
from .stats import (
    CvInterval,
    above_claimed_band,
    cv_interval,
    interpolate,
    median,
    percentile,
    speedup,
)
from .steady import (
    ROUNDS,
    SteadyState,
    SteadyStateUnavailable,
    least_squares_slope,
    round_averages,
    snia_steady_state,
)

__all__ = [
    "CvInterval",
    "LookPlan",
    "ROUNDS",
    "Sequential",
    "SteadyState",
    "SteadyStateUnavailable",
    "above_claimed_band",
    "cv_interval",
    "interpolate",
    "least_squares_slope",
    "log_ratios",
    "looks_problem",
    "median",
    "pairs_needed",
    "pass_probability",
    "percentile",
    "round_averages",
    "sequential",
    "snia_steady_state",
    "speedup",
]
