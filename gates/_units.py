"""Quantities with units, as people write them in TOML: "2GiB", "72h", "5.2 GB/s", "25 %"."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

_NUMBER = r"([0-9]+(?:\.[0-9]+)?|\.[0-9]+)"

SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}
DURATION_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0,
    "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
}
# Bandwidth units: bytes per second, or bits per second for links (Gb/s, Gbit/s).
RATE_UNITS = {
    "b/s": 1.0, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12,
    "kib/s": 1024.0, "mib/s": 1024.0**2, "gib/s": 1024.0**3,
}
BIT_RATE_UNITS = {"mbit/s": 1e6 / 8, "gbit/s": 1e9 / 8, "gbps": 1e9 / 8}


class UnitError(ValueError):
    """A quantity whose number or unit could not be read."""


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-zµ/%]*)", text.strip())
    if not match:
        raise UnitError(f"{text!r} is not a {what} (write it like {example!r})")
    return float(match.group(1)), match.group(2)


def parse_size(value: int | str) -> int:
    """Bytes from an int or a string such as "2GiB", "512KiB", "4k"."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a size")
    if isinstance(value, int):
        return value
    number, unit = _split(str(value), "size", "2GiB")
    try:
        return int(number * SIZE_UNITS[unit.lower()])
    except KeyError:
        raise UnitError(f"unknown size unit {unit!r} in {value!r} (use B, KiB, MiB, GiB, TiB, "
                        "KB, MB, GB, TB)") from None


def parse_duration(value: float | int | str) -> float:
    """Seconds from a number or a string such as "72h", "5m", "1h30m", "500us"."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).replace(" ", "")
    parts = re.findall(_NUMBER + r"([a-zµ]*)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UnitError(f"{value!r} is not a duration (write it like '72h', '5m' or '500us')")
    total = 0.0
    for number, unit in parts:
        if unit not in DURATION_UNITS:
            raise UnitError(f"unknown duration unit {unit!r} in {value!r} "
                            "(use ns, us, ms, s, m, h, d)")
        total += float(number) * DURATION_UNITS[unit]
    return total


def parse_rate(value: float | int | str) -> float:
    """Bytes per second from "5.2 GB/s", "800MiB/s" or a link speed such as "100 Gbit/s"."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a bandwidth")
    if isinstance(value, int | float):
        return float(value)
    number, unit = _split(str(value), "bandwidth", "5.2 GB/s")
    key = unit.lower()
    if unit.endswith("b/s") and unit[:-3].isupper() and len(unit) == 4:
        key = unit[0].lower() + "bit/s"  # "Gb/s" is bits, "GB/s" is bytes
    factor = RATE_UNITS.get(key) or BIT_RATE_UNITS.get(key)
    if factor is None:
        raise UnitError(f"unknown bandwidth unit {unit!r} in {value!r} "
                        "(use MB/s, GB/s, MiB/s, GiB/s, or Gb/s / Gbit/s for links)")
    return number * factor


def parse_percent(value: float | int | str) -> float:
    """Percent as a number: "25 %" and 25 both give 25.0."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a percentage")
    if isinstance(value, int | float):
        return float(value)
    number, unit = _split(str(value), "percentage", "25 %")
    if unit not in ("%", ""):
        raise UnitError(f"{value!r} is not a percentage (write it like '25 %')")
    return number


def format_size(n: float) -> str:
    """Bytes as a short binary-unit string: 268435456 -> "256 MiB"."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= factor:
            return f"{n / factor:.4g} {unit}"
    return f"{n:.0f} B"


def format_duration(seconds: float) -> str:
    """Seconds as "72h", "5m", "1.5s"."""
    for unit, factor in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= factor and seconds % factor == 0:
            return f"{seconds / factor:g}{unit}"
    return f"{seconds:g}s"


Size = Annotated[int, BeforeValidator(parse_size), PlainSerializer(format_size)]
Duration = Annotated[float, BeforeValidator(parse_duration), PlainSerializer(format_duration)]
Rate = Annotated[float, BeforeValidator(parse_rate),
                 PlainSerializer(lambda v: f"{v / 1e9:.4g} GB/s")]
Percent = Annotated[float, BeforeValidator(parse_percent), PlainSerializer(lambda v: f"{v:g} %")]
