"""Nothing silent (#17): `kvgate config check` refuses values a person did not mean.

One class per test, each through `kvgate config check` on the shipped files with one value
changed: the message names the file, the key, the value as written and the form to write, and
the exit code is 2 (bad input). The rule for units: in a file, a time or a percentage is a
string with its unit; a bare number (5, 0.25) or a unit-less string ("5") is refused. Code that
builds the models in Python passes plain seconds and percent.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from _configcheck import BAD_INPUT, check, refused
from _edits import edited
from hypothesis import given
from hypothesis import strategies as st

from gates.core.configuration import ConfigError, G1Limits, G3Limits, G4Limits, Site, validate
from gates.core.configuration.settings import FIO_MAX_IODEPTH, FIO_MAX_JOBS
from gates.core.quantities import UnitError, parse_duration
from gates.core.quantities.units import MAX_DURATION, parse_percent


def config_check(tmp_path: Path, repo: Path, capsys, site: tuple[str, str] | None = None,
                 thresholds: tuple[str, str] | None = None) -> tuple[int, str, Path, Path]:
    """`kvgate config check` on the shipped files with one (old, new) text replaced."""
    return check(tmp_path, capsys, [site] if site else [], [thresholds] if thresholds else [])


def test_the_shipped_files_pass(tmp_path, repo, capsys):
    code, err, _, _ = config_check(tmp_path, repo, capsys)
    assert code == 0, err


# ---- a bare number where a time is meant ---------------------------------------------------

@pytest.mark.parametrize(("written", "shown"), [('"5"', "'5'"), ("5", "5"), ("0.5", "0.5")])
def test_a_bare_duration_is_refused(tmp_path, repo, capsys, written, shown):
    code, err, _, th = config_check(tmp_path, repo, capsys, thresholds=(
        'randread_4k_qd1_p99_max = "500us"', f"randread_4k_qd1_p99_max = {written}"))
    number = shown.strip("'")
    refused(code, err, th, "key 'g1.randread_4k_qd1_p99_max'", f"{shown} has no unit",
            f'"{number}s" or "{number}ms"')


def test_a_bare_duration_in_the_site_file_is_refused(tmp_path, repo, capsys):
    code, err, site, _ = config_check(tmp_path, repo, capsys, site=(
        'timeout = "5m"', "timeout = 300"))
    refused(code, err, site, "key 'fio.timeout'", "300 has no unit", '"300s"')


# ---- a fraction where a percentage is meant ------------------------------------------------

@pytest.mark.parametrize("written", ["0.25", '"0.25"'])
def test_a_fraction_where_a_percentage_is_meant_is_refused(tmp_path, repo, capsys, written):
    code, err, _, th = config_check(tmp_path, repo, capsys, thresholds=(
        'ttft_p50_reduction_min = "25 %"', f"ttft_p50_reduction_min = {written}"))
    refused(code, err, th, "key 'g3.ttft_p50_reduction_min'", "0.25", "looks like a fraction",
            'write 25 % as "25 %"', '"0.25 %" if you mean 0.25 percent')


def test_a_bare_whole_percentage_is_refused_too(tmp_path, repo, capsys):
    code, err, _, th = config_check(tmp_path, repo, capsys, thresholds=(
        'cv_max = "5 %"', "cv_max = 5"))
    refused(code, err, th, "key 'g2.cv_max'", "5 has no unit", 'as "5 %"')


# ---- a percentage beyond what the quantity can be -------------------------------------------

@pytest.mark.parametrize(("old", "new", "key", "bound"), [
    ('ttft_p50_reduction_min = "25 %"', 'ttft_p50_reduction_min = "250 %"',
     "g3.ttft_p50_reduction_min", 'below "100 %"'),
    ('storage_read_fraction_min = "90 %"', 'storage_read_fraction_min = "101 %"',
     "g3.storage_read_fraction_min", 'at most "100 %"'),
    ('throughput_floor = "90 %"', 'throughput_floor = "120 %"', "g4.throughput_floor",
     'at most "100 %"'),
    ('other_cpu_max = "25 %"', 'other_cpu_max = "400 %"', "g2.other_cpu_max",
     'at most "100 %"'),
    ('smart_percent_used_max = "10 %"', 'smart_percent_used_max = "300 %"',
     "g1.smart_percent_used_max", 'at most "255 %"'),
])
def test_a_percentage_over_its_bound_is_refused(tmp_path, repo, capsys, old, new, key, bound):
    code, err, _, th = config_check(tmp_path, repo, capsys, thresholds=(old, new))
    written = new.split(" = ")[1].strip('"')
    refused(code, err, th, f"key '{key}'", f"'{written}' is out of range",
            f"write a value {bound}")


def test_a_band_whose_floor_is_above_its_ceiling_is_refused(tmp_path, repo, capsys):
    code, err, _, th = config_check(tmp_path, repo, capsys, thresholds=(
        'storage_side_band_min = "90 %"', 'storage_side_band_min = "200 %"'))
    refused(code, err, th, "key 'g3'", "storage_side_band_min (200 %)",
            "storage_side_band_max (150 %)")


@pytest.mark.parametrize(("new", "why"), [
    ('device_reference = "0.1s"', "0.1s is too short to time the device"),
    ('device_reference = "2m"', "out of range"),
    ('device_reference = 1', "1 has no unit"),
])
def test_a_device_reference_that_times_nothing_or_too_long_is_refused(tmp_path, repo, capsys,
                                                                       new, why):
    code, err, _, th = config_check(tmp_path, repo, capsys,
                                    thresholds=('device_reference = "0.5s"', new))
    refused(code, err, th, "key 'g2.device_reference'", why)


# ---- an absurd duration --------------------------------------------------------------------

@pytest.mark.parametrize("written", ["99999999999999999999d", "31d", "745h"])
def test_a_duration_longer_than_30_days_is_refused(tmp_path, repo, capsys, written):
    code, err, site, _ = config_check(tmp_path, repo, capsys, site=(
        'timeout = "5m"', f'timeout = "{written}"'))
    refused(code, err, site, "key 'fio.timeout'", f"'{written}' is longer than 30d",
            "write at most '30d'")


def test_30_days_is_accepted(tmp_path, repo, capsys):
    code, err, _, _ = config_check(tmp_path, repo, capsys, site=(
        'timeout = "5m"', 'timeout = "30d"'))
    assert code == 0, err


# ---- a G2 level above the workload's probe requests ---------------------------------------

def test_concurrency_above_the_probe_requests_is_refused(tmp_path, repo, capsys):
    code, err, site, th = config_check(tmp_path, repo, capsys, thresholds=(
        "concurrency = [8, 16]", "concurrency = [8, 100000000000]"))
    refused(code, err, th, "key 'g2.concurrency[1]'", "100000000000 requests in flight",
            f"{site} gives only 17 probe requests", "([workload] contexts = 17)",
            "write levels of at most 17 (e.g. concurrency = [8, 17])")


def test_the_engines_own_workload_bounds_concurrency_too(tmp_path, repo, capsys):
    # With [engine] prefer set, G2 runs the engine's workload when it is installed (the shipped
    # file prefers none since #47: the site's prefer is set here).
    code, err, site, th = check(tmp_path, capsys, site=[
        ('prefer = ""', 'prefer = "llamacpp"'),
        ("workload = { contexts = 24,", "workload = { contexts = 4,")])
    refused(code, err, th, "key 'g2.concurrency[0]'", "key 'g2.concurrency[1]'",
            f"{site} gives only 4 probe requests",
            '(contexts of the workload [engine] prefer = "llamacpp" runs = 4)',
            "at most 4 (e.g. concurrency = [2, 4])")


# ---- a sweep tier the arms would not put in force --------------------------------------------

@pytest.mark.parametrize(("old", "new", "key", "arm"), [
    ('"--gpu-cache", "{gpu_cache}", "--cpu-tier", "{cpu_tier}"]\nkv_dir = ".kvgate-target/kv-c',
     '"--gpu-cache", "{gpu_cache}"]\nkv_dir = ".kvgate-target/kv-c', "sweep.cpu_tier",
     "arms.candidate's command and env do not pass {cpu_tier}"),
    ('"--read-limit", "10MB/s",\n           "--gpu-cache", "{gpu_cache}", ',
     '"--read-limit", "10MB/s",\n           ', "sweep.gpu_cache",
     "arms.baseline's command and env do not pass {gpu_cache}"),
])
def test_a_sweep_tier_the_arms_do_not_take_is_refused(tmp_path, repo, capsys, old, new, key,
                                                      arm):
    code, err, site, _ = config_check(tmp_path, repo, capsys, site=(old, new))
    refused(code, err, site, f"key '{key}'", "would be drawn on the sweep's chart and held by "
            "its proof while the engine ran with its own", arm)


# ---- fio job counts and depths beyond what fio runs ----------------------------------------

@pytest.mark.parametrize(("old", "new", "key", "bound"), [
    ("kv_jobs = 4 ", f"kv_jobs = {2**63 - 1} ", "fio.kv_jobs", FIO_MAX_JOBS),
    ("kv_jobs = 4 ", f"kv_jobs = {FIO_MAX_JOBS + 1} ", "fio.kv_jobs", FIO_MAX_JOBS),
    ("qd_sweep = [1, 4, 16, 32]", "qd_sweep = [1, 4, 4294967300]", "fio.qd_sweep[2]",
     FIO_MAX_IODEPTH),
])
def test_a_fio_count_over_fios_limit_is_refused(tmp_path, repo, capsys, old, new, key, bound):
    code, err, site, _ = config_check(tmp_path, repo, capsys, site=(old, new))
    written = new.split(" = ")[1].strip(" []").split(", ")[-1]
    refused(code, err, site, f"key '{key}'", f"{written} is out of range",
            f"write a value at most {bound}")


def test_fios_own_limit_is_accepted(tmp_path, repo, capsys):
    code, err, _, _ = config_check(tmp_path, repo, capsys, site=(
        "kv_jobs = 4 ", f"kv_jobs = {FIO_MAX_JOBS} "))
    assert code == 0, err


# ---- limits_profile is the site file's key --------------------------------------------------

def test_an_unknown_limits_profile_is_the_site_files_error(tmp_path, repo, capsys):
    code, err, site, th = config_check(tmp_path, repo, capsys, site=(
        'limits_profile = "demo"', 'limits_profile = "dmeo"'))
    refused(code, err, site, "key 'site.limits_profile'", "'dmeo'",
            f"under [profiles] in {th}", "did you mean 'demo'?", 'limits_profile = "demo"',
            '"" for that file\'s own limits')


def test_the_profile_message_keeps_its_brackets_in_a_real_shell(tmp_path, repo):
    site = tmp_path / "site.toml"
    site.write_text(edited((repo / "site.toml").read_text(), 'limits_profile = "demo"',
                           'limits_profile = "nope"', where="site.toml"))
    done = subprocess.run([sys.executable, "-m", "gates.cli", "config", "check", "--site",
                           str(site), "--thresholds", str(repo / "thresholds.toml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == BAD_INPUT, done.stderr
    assert f"{site}: key 'site.limits_profile'" in done.stderr
    assert "under [profiles] in" in done.stderr and "(it has demo)" in done.stderr


# ---- the rule's other half: code passes plain numbers --------------------------------------

def test_code_may_pass_seconds_and_percent_as_numbers():
    limits = G1Limits(seq_read_bw_min=1, seq_write_bw_min=1, kv_restore_bw_min=1,
                      randread_4k_qd1_p99_max=0.0005, randread_4k_iops_min=1,
                      steady_state_spread_max=20)
    assert limits.randread_4k_qd1_p99_max == 0.0005 and limits.steady_state_spread_max == 20
    with pytest.raises(ConfigError, match="0.0005 has no unit"):
        validate(G1Limits, limits.model_dump() | {"randread_4k_qd1_p99_max": 0.0005},
                 Path("thresholds.toml"))


# ---- any written time or percentage: in range, or refused naming the value ------------------

_UNITS = ["", " ", "s", "ms", "us", "ns", "m", "min", "h", "d", "%", " %", "x", "1h", "e3"]
_WRITTEN = st.one_of(
    st.text(max_size=24),
    st.text(alphabet="0123456789. %smhdunµ-+e", max_size=16),
    st.builds(lambda n, u: f"{n}{u}", st.one_of(
        st.integers(0, 10**25), st.floats(0, 1e25, allow_nan=False, allow_infinity=False),
        st.decimals(0, 10, places=3, allow_nan=False).map(str)), st.sampled_from(_UNITS)),
)


@given(_WRITTEN)
def test_a_duration_parses_in_range_or_names_the_value(text):
    try:
        seconds = parse_duration(text)
    except UnitError as exc:
        assert repr(text) in str(exc)
        return
    assert math.isfinite(seconds) and 0 <= seconds <= MAX_DURATION


@given(_WRITTEN)
def test_a_percentage_parses_in_range_or_names_the_value(text):
    try:
        percent = parse_percent(text)
    except UnitError as exc:
        assert repr(text) in str(exc)
        return
    assert math.isfinite(percent) and percent >= 0 and "%" in text


@given(_WRITTEN)
def test_a_written_key_is_in_its_range_or_refused_naming_the_value(text):
    # Through the loader, with the key's own bounds: a reduction below 100 %, a soak > 0.
    for model, key, fits in ((G3Limits, "ttft_p50_reduction_min", lambda v: 0 <= v < 100),
                             (G4Limits, "duration", lambda v: 0 < v <= MAX_DURATION)):
        # window <= it, and no warm-up window: one window is then the whole soak
        keys = {key: text} | ({"window": text, "warmup_windows": 0} if key == "duration" else {})
        try:
            value = getattr(validate(model, keys, Path("t.toml")), key)
        except ConfigError as exc:
            assert f"key '{key}'" in str(exc) and repr(text) in str(exc)
            continue
        assert fits(value)


def test_a_bare_stall_timeout_is_refused_and_a_written_one_read(tmp_path):
    base = {"site": {"name": "s"}, "target": {"directory": "/t"}, "fio": {"file_size": "1MiB"}}
    with pytest.raises(ConfigError, match=r"workload.stall_timeout.*600.0 has no unit"):
        validate(Site, base | {"workload": {"stall_timeout": 600.0}}, tmp_path / "site.toml")
    site = validate(Site, base | {"workload": {"stall_timeout": "10m"}}, tmp_path / "site.toml")
    assert site.workload.stall_timeout == 600.0
