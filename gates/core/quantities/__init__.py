"""Quantities as people write them in TOML (sizes, rates, durations) and back. Pure."""

from .units import (
    MAX_SIZE,
    WRITTEN,
    Bytes,
    Duration,
    Percent,
    Rate,
    Size,
    UnitError,
    bandwidth_unit,
    format_duration,
    format_size,
    parse_duration,
    parse_rate,
    parse_size,
)

__all__ = [
    "Bytes",
    "Duration",
    "MAX_SIZE",
    "Percent",
    "Rate",
    "Size",
    "UnitError",
    "WRITTEN",
    "bandwidth_unit",
    "format_duration",
    "format_size",
    "parse_duration",
    "parse_rate",
    "parse_size",
]
