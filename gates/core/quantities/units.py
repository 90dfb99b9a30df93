"""Quantities with units, as people write them in TOML: "2GiB", "72h", "5.2 GB/s", "25 %"."""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer, ValidationInfo

_NUMBER = r"([0-9]+(?:\.[0-9]+)?|\.[0-9]+)"

SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}
DURATION_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
    "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
}
# Bandwidth units: bytes per second, or bits per second for links (Gb/s, Gbit/s).
RATE_UNITS = {
    "b/s": 1.0, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12,
    "kib/s": 1024.0, "mib/s": 1024.0**2, "gib/s": 1024.0**3, "tib/s": 1024.0**4,
}
BIT_RATE_UNITS = {
    "kbit/s": 1e3 / 8, "mbit/s": 1e6 / 8, "gbit/s": 1e9 / 8, "tbit/s": 1e12 / 8,
    "kbps": 1e3 / 8, "mbps": 1e6 / 8, "gbps": 1e9 / 8, "tbps": 1e12 / 8,
}


class UnitError(ValueError):
    """A quantity whose number or unit could not be read."""


# The longest time a setting may hold. The longest thing kvgate times is the G4 soak (72 h
# by default); 30 days is ten times that. A timeout beyond it is no timeout at all, and
# "99999999999999999999d" (8.6e24 s) overflows the timers it reaches (select(): "timestamp out
# of range for platform time_t").
MAX_DURATION = 30 * 86400.0

# The largest size a setting may hold: 2^63 - 1 bytes (8 EiB). Linux addresses no file or
# device beyond it (loff_t is a signed 64-bit count), and fio refuses a larger size= ("failed
# parsing size=9223372036854775808", fio 3.33).
MAX_SIZE = 2**63 - 1

# Validation context key set by gates.core.config for values read from a file a person wrote:
# there a time, a percentage or a size must carry its unit. Code passes plain seconds, percent
# and bytes.
WRITTEN = "kvgate.written"


_DURATION_PART = re.compile(_NUMBER + r"\s*([a-zµμ]*)\s*")


def _finite(result: float, value: object, what: str) -> float:
    if not math.isfinite(result):
        raise UnitError(f"{value!r} is too large for a {what}")
    return result


def _split(text: str, what: str, example: str) -> tuple[str, str]:
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-zµ/%]*)", text.strip())
    if not match:
        raise UnitError(f"{text!r} is not a {what} (write it like {example!r})")
    return match.group(1), match.group(2)


def _number(value: float | int, what: str) -> float:
    """A plain number given for a quantity: finite and not negative, like the written form."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or number < 0:
        raise UnitError(f"{value!r} is not a {what} (it must be a finite number >= 0)")
    return number


def parse_size(value: int | str) -> int:
    """Bytes from an int or a string such as "2GiB", "512KiB", "4k"."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise UnitError(f"{value!r} is not a size (it must be >= 0)")
        return value
    if isinstance(value, float):
        # Whole bytes; a float such as 1.5e9 from TOML is rounded like a written "1.5GB".
        return int(Decimal(_number(value, "size")).to_integral_value(ROUND_HALF_UP))
    number, unit = _split(str(value), "size", "2GiB")
    try:
        factor = SIZE_UNITS[unit.lower()]
    except KeyError:
        raise UnitError(f"unknown size unit {unit!r} in {value!r} (use B, KiB, MiB, GiB, TiB, "
                        "KB, MB, GB, TB)") from None
    # Decimal, not float: "8.2MB" is 8200000 bytes, not int(8199999.999999999).
    return int((Decimal(number) * factor).to_integral_value(ROUND_HALF_UP))


def _at_most_max_duration(seconds: float, value: object) -> float:
    if seconds > MAX_DURATION:
        raise UnitError(f"{value!r} is longer than 30d, the longest time a kvgate setting may "
                        "hold (ten 72-hour soaks): write at most '30d'")
    return seconds


def parse_duration(value: float | int | str) -> float:
    """Seconds from a number of seconds or a string such as "72h", "5m", "1h30m", "500us".

    A string must name its unit: "5" is refused (5 s? 5 ms?). At most 30 days (MAX_DURATION).
    """
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        return _at_most_max_duration(_number(value, "duration"), value)
    text = str(value).strip()
    if re.fullmatch(_NUMBER, text):
        raise UnitError(_no_time_unit(value, text))
    # Spaces may separate a number from its unit and one part from the next ("1h 30m"), but
    # never join digits: "30 5" is not 305 s. Every part names its unit.
    parts, pos = [], 0
    while text and pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if not match:
            break
        parts.append(match.groups())
        pos = match.end()
    if not parts or pos < len(text) or any(u == "" for _, u in parts):
        raise UnitError(f"{value!r} is not a duration (write it like '72h', '5m' or '500us')")
    total = 0.0
    for number, unit in parts:
        if unit not in DURATION_UNITS:
            raise UnitError(f"unknown duration unit {unit!r} in {value!r} "
                            "(use ns, us, ms, s, m, h, d)")
        total += float(number) * DURATION_UNITS[unit]
    return _at_most_max_duration(_finite(total, value, "duration"), value)


def _no_time_unit(value: object, number: str) -> str:
    return (f"{value!r} has no unit: write a time with one, e.g. \"{number}s\" or "
            f"\"{number}ms\"")


def parse_rate(value: float | int | str) -> float:
    """Bytes per second from "5.2 GB/s", "800MiB/s" or a link speed such as "100 Gbit/s"."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a bandwidth")
    if isinstance(value, int | float):
        return _number(value, "bandwidth")
    number, unit = _split(str(value), "bandwidth", "5.2 GB/s")
    key = unit.lower()
    if re.fullmatch(r"[KMGT]b/s", unit):
        key = unit[0].lower() + "bit/s"  # "Gb/s" is bits, "GB/s" is bytes
    elif re.fullmatch(r"[kmgt]?b/s|[kmgtKMGT]ib/s", unit):
        # "gb/s" or "Mib/s": bits or bytes? Guessing wrong is a factor of 8.
        raise UnitError(f"ambiguous bandwidth unit {unit!r} in {value!r}: write 'GB/s' or "
                        "'MiB/s' for bytes, 'Gb/s' or 'Gbit/s' for bits")
    factor = RATE_UNITS.get(key) or BIT_RATE_UNITS.get(key)
    if factor is None:
        raise UnitError(f"unknown bandwidth unit {unit!r} in {value!r} "
                        "(use MB/s, GB/s, MiB/s, GiB/s, or Gb/s / Gbit/s for links)")
    return _finite(float(number) * factor, value, "bandwidth")


def parse_percent(value: float | int | str) -> float:
    """Percent as a number: "25 %" (a string names its "%") and the number 25 give 25.0."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a percentage")
    if isinstance(value, int | float):
        return _number(value, "percentage")
    number, unit = _split(str(value), "percentage", "25 %")
    if unit == "":
        raise UnitError(_no_percent_sign(value, number))
    if unit != "%":
        raise UnitError(f"{value!r} is not a percentage (write it like '25 %')")
    return _finite(float(number), value, "percentage")


def _no_percent_sign(value: object, number: str) -> str:
    """Why a percentage without "%" is refused, and how to write the one that was meant."""
    amount = Decimal(number)
    if 0 < amount < 1:
        # 0.25 is a fraction: as a percentage it is 25 %, and 0.25 % needs its sign.
        meant = _plain(float(amount * 100))
        return (f"{value!r} looks like a fraction, not a percentage: write {meant} % as "
                f"\"{meant} %\" (or \"{number} %\" if you mean {number} percent)")
    return f"{value!r} has no unit: write a percentage with its sign, as \"{number} %\""


def _bare(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _written(info: ValidationInfo) -> bool:
    return bool(isinstance(info.context, dict) and info.context.get(WRITTEN))


def _size_field(value: object, info: ValidationInfo) -> int:
    """A Size: in a file a person wrote a number without a unit is refused (64: bytes? MiB?).

    Zero is zero in any unit, so "0" and 0 need none.
    """
    size = parse_size(value)  # type: ignore[arg-type]
    text = value.strip() if isinstance(value, str) else None
    number = text if re.fullmatch(_NUMBER, text or "") else _plain_number(value) if _bare(
        value) else None
    if _written(info) and number is not None and Decimal(number) != 0:
        raise UnitError(f"{value!r} has no unit: write a size with one, e.g. \"{number}MiB\" "
                        f"or \"{number}GiB\" (\"{number}B\" if you mean {number} bytes)")
    if size > MAX_SIZE:
        raise UnitError(f"{value!r} is out of range: write a size of at most {MAX_SIZE}B "
                        "(8 EiB): Linux addresses no file or device beyond it, and fio takes "
                        "no larger size")
    return size


def _duration_field(value: object, info: ValidationInfo) -> float:
    """A Duration: in a file a person wrote a bare number is refused (5 s? 5 ms?)."""
    if _bare(value) and _written(info):
        _number(value, "duration")  # type: ignore[arg-type]
        raise UnitError(_no_time_unit(value, _plain_number(value)))
    return parse_duration(value)  # type: ignore[arg-type]


def _percent_field(value: object, info: ValidationInfo) -> float:
    """A Percent: in a file a person wrote a bare number is refused (0.25: 25 % or 0.25 %?)."""
    if _bare(value) and _written(info):
        _number(value, "percentage")  # type: ignore[arg-type]
        raise UnitError(_no_percent_sign(value, _plain_number(value)))
    return parse_percent(value)  # type: ignore[arg-type]


def _plain_number(value: object) -> str:
    return str(value) if isinstance(value, int) else _plain(float(value))  # type: ignore[arg-type]


def _plain(x: float) -> str:
    """The shortest text that reads back as exactly x, never in exponent form ("1e-07")."""
    text = format(Decimal(repr(float(x))), "f")
    return text.removesuffix(".0") if "." in text and text.endswith(".0") else text


def format_size(n: float) -> str:
    """Bytes as a short binary-unit string for people: 268435456 -> "256 MiB"."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= factor:
            # 4 significant digits, but every digit of the whole part: "12345 TiB".
            scaled = n / factor
            return f"{scaled:.0f} {unit}" if abs(scaled) >= 1000 else f"{scaled:.4g} {unit}"
    return f"{n:.0f} B"


def format_duration(seconds: float) -> str:
    """Seconds as "72h", "5m", "1.5s": exact, so parse_duration reads back the same value."""
    for unit, factor in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= factor and seconds % factor == 0:
            return f"{_plain(seconds / factor)}{unit}"
    return f"{_plain(seconds)}s"


def _serialize_size(n: int) -> str:
    """Exact: the largest unit that divides n ("256MiB", "1GB"), else plain bytes."""
    for unit in ("TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "KB"):
        factor = SIZE_UNITS[unit.lower()]
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def _serialize_rate(v: float) -> str:
    """Exact: GB/s when that reads back as the same value, else B/s."""
    gb = _plain(v / 1e9)
    return f"{gb} GB/s" if parse_rate(f"{gb} GB/s") == v else f"{_plain(v)} B/s"


Size = Annotated[int, BeforeValidator(_size_field), PlainSerializer(_serialize_size)]
# A count of bytes that is always written in bytes, as a sector size is (512, 4096: what nvme
# id-ns and lsblk print): a bare whole number is bytes, as the shipped examples write it.
Bytes = Annotated[int, BeforeValidator(parse_size), PlainSerializer(_serialize_size)]
Duration = Annotated[float, BeforeValidator(_duration_field), PlainSerializer(format_duration)]
Rate = Annotated[float, BeforeValidator(parse_rate), PlainSerializer(_serialize_rate)]
Percent = Annotated[float, BeforeValidator(_percent_field),
                    PlainSerializer(lambda v: f"{_plain(v)} %")]


def bandwidth_unit(limit_bytes: float) -> tuple[str, float]:
    """Display unit for a bandwidth: GB/s for array-sized limits, MB/s for small ones."""
    return ("GB/s", 1e9) if limit_bytes >= 1e9 else ("MB/s", 1e6)
