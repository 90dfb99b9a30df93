"""gates.core.units: quantities as people write them in TOML, and back."""

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import BaseModel

from gates.core.quantities import (
    Rate,
    UnitError,
    format_duration,
    format_size,
    parse_duration,
    parse_rate,
    parse_size,
)
from gates.core.quantities.units import MAX_DURATION, Duration, Percent, Size, parse_percent

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


# ---- sizes -----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("2GiB", 2 * GiB),
    ("512KiB", 512 * KiB),
    ("4k", 4 * KiB),
    ("4K", 4 * KiB),
    ("256 MiB", 256 * MiB),
    ("1.5GiB", 3 * GiB // 2),
    ("1TiB", TiB),
    ("1GB", 10**9),
    ("8.2MB", 8_200_000),  # exact decimal arithmetic; int(8.2 * 1e6) would be 8199999
    ("4.1GB", 4_100_000_000),
    ("1.005KB", 1005),
    ("100", 100),
    ("100b", 100),
    ("  8 MB ", 8 * 10**6),
    (4096, 4096),
    (0, 0),
    (1.5e9, 1_500_000_000),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected
    assert isinstance(parse_size(text), int)


@pytest.mark.parametrize("bad", ["2 parsecs", "lots", "", "GiB", "-1GiB", "1e9", "2 GiB x"])
def test_parse_size_rejects_and_names_the_value(bad):
    with pytest.raises(UnitError) as info:
        parse_size(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [-1, True, False, math.nan, math.inf, -2.0])
def test_parse_size_rejects_bad_numbers(bad):
    with pytest.raises(UnitError):
        parse_size(bad)


def test_unknown_size_unit_lists_the_known_ones():
    with pytest.raises(UnitError, match=r"unknown size unit 'parsecs' in '2 parsecs'.*GiB"):
        parse_size("2 parsecs")


# ---- durations -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("72h", 72 * 3600.0),
    ("5m", 300.0),
    ("5min", 300.0),
    ("1h30m", 5400.0),
    ("1h 30m", 5400.0),
    ("500us", 500e-6),
    ("500µs", 500e-6),
    ("2ms", 2e-3),
    ("10ns", 10e-9),
    ("1d", 86400.0),
    ("1.5s", 1.5),
    (" 8s ", 8.0),
    ("30d", 30 * 86400.0),  # the longest a setting may hold
    ("720h", 30 * 86400.0),
    (30, 30.0),
    (2.5, 2.5),
])
def test_parse_duration(text, expected):
    assert parse_duration(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("bad", [
    "", "   ", "h", "5 fortnights", "72H", "-5s", "1.5.5", "30 5", "5s5", "1h30", "1e3s",
    "9" * 400 + "s",
    "30", " 0.5 ", "0",  # a string names its unit: 30 s? 30 ms?
    "31d", "30d1s", "99999999999999999999d",  # longer than any setting may hold
])
def test_parse_duration_rejects_and_names_the_value(bad):
    with pytest.raises(UnitError) as info:
        parse_duration(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [True, -1, -0.5, math.nan, math.inf, MAX_DURATION + 1, 10**30])
def test_parse_duration_rejects_bad_numbers(bad):
    with pytest.raises(UnitError):
        parse_duration(bad)


def test_a_unitless_duration_says_how_to_write_it():
    with pytest.raises(UnitError, match=r"'5' has no unit: .*\"5s\" or \"5ms\""):
        parse_duration("5")


def test_a_duration_over_30_days_names_the_limit():
    with pytest.raises(UnitError, match=r"'40d' is longer than 30d.*write at most '30d'"):
        parse_duration("40d")


# ---- bandwidths ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("5 GB/s", 5e9),  # bytes
    ("5.2 GB/s", 5.2e9),
    ("100 Gb/s", 12.5e9),  # bits: a 100GbE link carries 12.5 GB/s
    ("100 Gbit/s", 12.5e9),
    ("100 Gbps", 12.5e9),
    ("400 Mb/s", 50e6),
    ("1.6 Tb/s", 200e9),
    ("800MiB/s", 800 * MiB),
    ("2 GiB/s", 2 * GiB),
    ("50 MB/s", 50e6),
    ("10 kB/s", 1e4),
    ("1 B/s", 1.0),
    (5e9, 5e9),
    (0, 0.0),
])
def test_parse_rate(text, expected):
    assert parse_rate(text) == pytest.approx(expected, rel=1e-12)


def test_bits_and_bytes_differ_by_eight():
    assert parse_rate("8 Gb/s") == parse_rate("1 GB/s")


@pytest.mark.parametrize("bad", ["5 GB", "fast", "5 parsecs/s", "", "-5 GB/s", "5 GB/h"])
def test_parse_rate_rejects_and_names_the_value(bad):
    with pytest.raises(UnitError) as info:
        parse_rate(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("ambiguous", ["5 gb/s", "5 mb/s", "5 b/s", "5 Mib/s"])
def test_parse_rate_refuses_to_guess_bits_or_bytes(ambiguous):
    with pytest.raises(UnitError, match="ambiguous"):
        parse_rate(ambiguous)


@pytest.mark.parametrize("bad", [True, -1, math.nan, -math.inf])
def test_parse_rate_rejects_bad_numbers(bad):
    with pytest.raises(UnitError):
        parse_rate(bad)


# ---- percentages -----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("25 %", 25.0), ("25%", 25.0), ("0.5 %", 0.5), ("250 %", 250.0), (25, 25.0), (2.5, 2.5),
])
def test_parse_percent(text, expected):
    assert parse_percent(text) == expected


@pytest.mark.parametrize("bad", ["25 percent", "25 GB", "x %", "", "-5 %", "25", "0.25"])
def test_parse_percent_rejects_and_names_the_value(bad):
    with pytest.raises(UnitError) as info:
        parse_percent(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [True, -5, math.nan])
def test_parse_percent_rejects_bad_numbers(bad):
    with pytest.raises(UnitError):
        parse_percent(bad)


@pytest.mark.parametrize(("text", "says"), [
    ("0.25", r"'0\.25' looks like a fraction.*write 25 % as \"25 %\" .*\"0\.25 %\""),
    ("0.07", r"write 7 % as \"7 %\""),
    ("25", r"'25' has no unit: .*as \"25 %\""),
])
def test_a_percentage_without_its_sign_says_how_to_write_it(text, says):
    with pytest.raises(UnitError, match=says):
        parse_percent(text)


# ---- formatting ------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "text"), [
    (268435456, "256 MiB"),
    (1536, "1.5 KiB"),
    (1000, "1000 B"),
    (0, "0 B"),
    (2 * GiB, "2 GiB"),
    (3 * TiB, "3 TiB"),
    (1234567, "1.177 MiB"),
    (12345 * TiB, "12345 TiB"),  # no "1.234e+04"
])
def test_format_size(n, text):
    assert format_size(n) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (72 * 3600, "3d"),
    (71 * 3600, "71h"),
    (300, "5m"),
    (90, "90s"),
    (5400, "90m"),
    (1.5, "1.5s"),
    (0, "0s"),
    (0.0005, "0.0005s"),
    (1e-7, "0.0000001s"),  # no exponent form that parse_duration cannot read
    (123.4567, "123.4567s"),  # no rounding to 6 significant digits
])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


# ---- properties ------------------------------------------------------------------------

@given(st.integers(min_value=1, max_value=1023), st.sampled_from([1, 2, 4]),
       st.sampled_from([KiB, MiB, GiB, TiB]))
def test_format_size_round_trips_where_exact(count, divisor, factor):
    # Where the short form is exact: at most 4 significant digits of the unit.
    assume(len(f"{count / divisor:g}".replace(".", "")) <= 4)
    n = count * factor // divisor
    assert parse_size(format_size(n)) == n


@given(st.integers(min_value=1024, max_value=10**7))
def test_format_size_never_loses_the_whole_part(count):
    assert parse_size(format_size(count * TiB)) == count * TiB


@given(st.floats(min_value=0, max_value=MAX_DURATION, allow_nan=False))
def test_format_duration_round_trips_exactly(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.integers(min_value=0, max_value=10**6),
       st.sampled_from(["", "b", "k", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"]))
def test_parse_size_whole_numbers_are_exact(count, unit):
    factor = {"": 1, "b": 1, "k": KiB, "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
              "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}[unit.lower()]
    assert parse_size(f"{count}{unit}") == count * factor
    assert parse_size(f"{count} {unit}") == count * factor


@given(st.integers(0, 719), st.integers(0, 59), st.integers(0, 59))
def test_compound_durations_add_up(h, m, s):
    assert parse_duration(f"{h}h{m}m{s}s") == h * 3600 + m * 60 + s


class _Quantities(BaseModel):
    size: Size
    duration: Duration
    rate: Rate
    percent: Percent


@given(st.integers(min_value=0, max_value=2**62),
       st.floats(min_value=0, max_value=MAX_DURATION, allow_nan=False),
       st.floats(min_value=0, max_value=1e15, allow_nan=False),
       st.floats(min_value=0, max_value=1e4, allow_nan=False))
def test_serialized_quantities_read_back_unchanged(size, duration, rate, percent):
    model = _Quantities(size=size, duration=duration, rate=rate, percent=percent)
    dumped = model.model_dump(mode="json")
    assert all(isinstance(v, str) for v in dumped.values())
    assert _Quantities.model_validate(dumped) == model


_UNIT_TEXT = st.text(alphabet="0123456789.  kKmMgGtTiIbBsSuµμnhd/%%-+eE,x", max_size=20)


@pytest.mark.parametrize("parse", [parse_size, parse_duration, parse_rate, parse_percent])
@given(text=st.one_of(st.text(max_size=30), _UNIT_TEXT))
def test_arbitrary_text_raises_only_unit_error(parse, text):
    try:
        result = parse(text)
    except UnitError:
        return
    assert isinstance(result, int | float)
    assert math.isfinite(result) and result >= 0
