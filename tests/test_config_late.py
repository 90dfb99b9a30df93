"""Nothing late (#27): `kvgate config check` runs every check the run makes on the files alone.

Each case was found on main: `config check` said OK to a value the run then tripped on, or
quietly read as something else. Here each is refused by `kvgate config check` on the shipped
files with the one value changed, exit 2 (bad input), the message naming the file, the key and
the value; then, per class, a property: what the files' check accepts, the run accepts too.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from _configcheck import REPO, check, refused
from _edits import edited
from hypothesis import given
from hypothesis import strategies as st

from gates.cli import main
from gates.core.configuration import ConfigError, Site, validate
from gates.core.configuration.config import load_thresholds
from gates.core.configuration.cross_checks import soak_windows
from gates.core.configuration.site_checks import both_files_problems
from gates.core.configuration.thresholds import RELATIVE, Relative
from gates.core.quantities import parse_duration
from gates.core.quantities.units import SIZE_UNITS
from gates.core.statistics.steady import ROUNDS
from gates.model import CATALOGUE
from gates.soak import soak_plan


def test_the_shipped_files_pass(tmp_path, capsys):
    code, err, _, _ = check(tmp_path, capsys)
    assert code == 0, err


@pytest.mark.parametrize("example", sorted((REPO / "examples").glob("*.toml")),
                         ids=lambda p: p.name)
def test_every_example_passes_with_the_shipped_limits(tmp_path, capsys, example):
    code, err, _, _ = check(tmp_path, capsys, site_text=example.read_text())
    assert code == 0, err


# ---- sizes: a unit, a value fio can take, blocks that fit the file --------------------------

@pytest.mark.parametrize(("written", "shown", "number"), [
    ("64", "64", "64"), ('"64"', "'64'", "64"), ("1.5e9", "1500000000.0", "1500000000")])
def test_a_size_without_a_unit_is_refused(tmp_path, capsys, written, shown, number):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('file_size = "256MiB"', f"file_size = {written}")])
    refused(code, err, site, "key 'fio.file_size'", f"{shown} has no unit",
            f'e.g. "{number}MiB"', f'"{number}B" if you mean {number} bytes')


def test_a_sector_size_is_a_byte_count_as_the_examples_write_it(tmp_path, capsys):
    code, err, _, _ = check(tmp_path, capsys, site=[
        ("# sector_size = 4096 ", "sector_size = 4096 ")])
    assert code == 0, err


def test_zero_needs_no_unit(tmp_path, capsys):
    code, err, _, _ = check(tmp_path, capsys, site=[('min_free = "1GiB"', 'min_free = "0"')])
    assert code == 0, err


@pytest.mark.parametrize("written", ["10000000TiB", "9223372036854775808B"])
def test_a_file_size_fio_cannot_take_is_refused(tmp_path, capsys, written):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('file_size = "256MiB"', f'file_size = "{written}"')])
    refused(code, err, site, "key 'fio.file_size'", f"'{written}' is out of range",
            "at most")


@pytest.mark.parametrize(("old", "new", "key"), [
    ('kv_block = "256KiB"', 'kv_block = "512MiB"', "fio.kv_block"),
    ('kv_jobs = 4 ', 'seq_block = "1GiB"\nkv_jobs = 4 ', "fio.seq_block"),
])
def test_a_block_larger_than_the_file_is_refused(tmp_path, capsys, old, new, key):
    code, err, site, _ = check(tmp_path, capsys, site=[(old, new)])
    refused(code, err, site, f"key '{key}'", 'fio.file_size = "256MiB"', "size too small")


def test_a_file_smaller_than_the_4k_jobs_block_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('file_size = "256MiB"', 'file_size = "2KiB"'), ('kv_block = "256KiB"',
                                                          'kv_block = "1KiB"'),
        ('kv_jobs = 4 ', 'seq_block = "1KiB"\nkv_jobs = 4 ')])
    refused(code, err, site, "key 'fio.file_size': '2KiB' is smaller than the 4 KiB blocks")


def test_a_direct_io_block_off_the_sector_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('kv_block = "256KiB"', 'kv_block = "1000B"')])
    refused(code, err, site, "key 'fio.kv_block': '1000B' is not a whole number of 512-byte",
            "direct = true")


def test_a_block_off_the_ordered_sector_size_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ("# sector_size = 4096 ", "sector_size = 4096 "),
        ('kv_block = "256KiB"', 'kv_block = "258KiB"')])
    refused(code, err, site, "key 'fio.kv_block': '258KiB'",
            'topology.sector_size = "4KiB"', "EINVAL")


def test_a_sector_size_that_does_not_divide_the_4k_jobs_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ("# sector_size = 4096 ", "sector_size = 8192 ")])
    refused(code, err, site, "key 'topology.sector_size': 8192 does not divide G1's 4 KiB")


def test_code_may_pass_sizes_as_plain_bytes():
    # The rule's other half, as for times: code that builds the models passes plain numbers.
    from gates.core.configuration import FioSettings

    fio = FioSettings(file_size=64 * 1024**2, kv_block=4096, seq_block=1024**2)
    assert (fio.file_size, fio.kv_block) == (64 * 1024**2, 4096)
    with pytest.raises(ConfigError, match="67108864 has no unit"):
        validate(FioSettings, {"file_size": 64 * 1024**2}, Path("site.toml"))


def test_test_files_larger_than_the_ordered_capacity_are_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('# capacity = "14TB"', 'capacity = "300MiB"')])
    refused(code, err, site, "key 'fio.file_size': '256MiB' x 2 test files",
            'topology.capacity = "300MiB"', "could never fit")


# ---- the soak: a plan the G4 rules can judge ------------------------------------------------

def test_a_soak_of_zero_is_refused_not_72_hours(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('duration = "2m" ', 'duration = "0s" ')])
    refused(code, err, site, "key 'soak.duration'", "'0s'")


def test_a_soak_window_of_zero_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[('window = "20s" ', 'window = "0s" ')])
    refused(code, err, site, "key 'soak.window'", "'0s'")


def test_a_soak_window_longer_than_the_soak_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[('window = "20s" ', 'window = "5m" ')])
    refused(code, err, site, "key 'soak.window': soak.window = \"5m\" is longer than the soak",
            'soak.duration = "2m"')


def test_a_soak_too_short_for_the_snia_rounds_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[('window = "20s" ', 'window = "30s" ')])
    refused(code, err, site, "key 'soak.duration'", 'soak.duration = "2m" holds 4 windows',
            'soak.window = "30s"', "3 after the warm-up", f"{ROUNDS} rounds", "SNIA",
            '"3m"')


def test_the_site_soak_is_judged_with_the_thresholds_window(tmp_path, capsys):
    # [soak] sets the duration only: the window is thresholds.toml's 5 minutes.
    code, err, site, th = check(tmp_path, capsys, site=[
        ('window = "20s" ', '# window = "20s" '), ('duration = "2m" ', 'duration = "20m" ')])
    refused(code, err, site, "key 'soak.duration'", '"20m"', f'{th} [g4] window = "5m"',
            "4 windows")


def test_a_thresholds_soak_too_short_for_the_snia_rounds_is_refused(tmp_path, capsys):
    code, err, _, th = check(tmp_path, capsys, thresholds=[
        ('window = "5m" ', 'window = "20h" ')])
    refused(code, err, th, "key 'g4.duration': '72h' holds 4 windows", 'window = "20h"',
            f"{ROUNDS} rounds")


@pytest.mark.parametrize("written", ["0 MB/s", "0.5 B/s"])
def test_a_verify_rate_fio_reads_as_unlimited_is_refused(tmp_path, capsys, written):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('verify_rate = "32 MB/s"', f'verify_rate = "{written}"')])
    refused(code, err, site, "key 'soak.verify_rate': must be at least 1 B/s", "unlimited",
            f"(got '{written}')")


def test_a_verify_pass_smaller_than_its_block_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('verify_size = "64MiB"', 'verify_size = "64KiB"')])
    refused(code, err, site, "key 'soak.verify_size'", "'64KiB' is out of range", '"128KiB"')


# ---- statistics and the engine: what the G2 levels need -------------------------------------

def test_one_repetition_is_refused(tmp_path, capsys):
    code, err, _, th = check(tmp_path, capsys, thresholds=[
        ("repetitions = 3", "repetitions = 1")])
    refused(code, err, th, "key 'g2.repetitions'", "1 is out of range", "at least 2",
            "coefficient of variation")


# The llama.cpp checks hold for a site that prefers it (the shipped file prefers none, #47).
LLAMACPP = ('prefer = ""', 'prefer = "llamacpp"')


def test_fewer_slots_than_a_g2_level_is_refused(tmp_path, capsys):
    code, err, site, th = check(tmp_path, capsys, site=[LLAMACPP, ("slots = 16 ", "slots = 8 ")])
    refused(code, err, site, "key 'engine.slots'", "8", "[g2] concurrency",
            "16", "slots = 16")


def test_a_llamacpp_slot_shorter_than_a_probe_is_warned(tmp_path, capsys):
    # A warning: whether a slot may use more than its share of the server's context (llama.cpp
    # 's unified KV cache) depends on the build.
    paths = check(tmp_path, capsys, site=[LLAMACPP])[2:]
    text = edited(paths[0].read_text(), "slot_tokens = 2048 ", "slot_tokens = 1000 ",
                  where="site.toml")
    paths[0].write_text(text)
    code = main(["config", "check", "--site", str(paths[0]), "--thresholds", str(paths[1])])
    out = capsys.readouterr().out
    assert code == 0
    assert "warning" in out and "key 'engine.slot_tokens': 1000 tokens" in out, out
    assert "1024 + 32 + 32 = 1088" in out and "slot_tokens = 1088 or more" in out, out


def test_a_vllm_context_shorter_than_a_probe_is_refused(tmp_path, capsys):
    # As gates.engines.vllm's workload_fit refuses it at the run, with the engine installed.
    code, err, site, _ = check(tmp_path, capsys, site_text=(
        '[site]\nname = "s"\n[target]\ndirectory = "t"\n[fio]\nfile_size = "16MiB"\n'
        '[engine]\nprefer = "vllm"\n[engine.vllm]\nmax_model_len = 1000\n'))
    refused(code, err, site, "key 'engine.vllm.max_model_len': 1000 tokens",
            "4096 + 32 + 32 = 4160", "max_model_len = 4160 or more")


def test_a_flood_without_fillers_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('eviction = "reset" ', 'eviction = "flood" ')])
    refused(code, err, site, "key 'workload.filler_contexts': 0 filler contexts evict nothing")


def test_a_bare_time_in_the_engines_workload_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ("vocab = 4296 }", "vocab = 4296, stall_timeout = 120 }")])
    refused(code, err, site, "engine.workload", "stall_timeout", "120 has no unit")


# ---- paths and names: nothing quietly becomes something else --------------------------------

def test_an_empty_target_directory_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('directory = ".kvgate-target"', 'directory = ""')])
    refused(code, err, site, "key 'target.directory'", "''", "empty")


def test_an_empty_kv_dir_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('kv_dir = ".kvgate-target/kv-candidate"', 'kv_dir = ""')])
    refused(code, err, site, "key 'arms.candidate.kv_dir'", "empty")


def test_arms_sharing_a_kv_dir_are_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('kv_dir = ".kvgate-target/kv-candidate"', 'kv_dir = ".kvgate-target/kv-baseline"')])
    refused(code, err, site, "share kv_dir", "each arm needs its own")


def test_a_model_the_catalogue_does_not_know_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('model = "qwen3-coder-480b" ', 'model = "qwen9-huge" ')])
    refused(code, err, site, "key 'sizing.model'", "'qwen9-huge'",
            *sorted(CATALOGUE)[:2], "config.json")


def test_an_array_the_catalogue_does_not_know_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[('array = ""', 'array = "FX999"')])
    refused(code, err, site, "key 'site.array'", "'FX999'", "FX100", "catalog")


def test_a_known_array_is_accepted(tmp_path, capsys):
    code, err, _, _ = check(tmp_path, capsys, site=[('array = ""', 'array = "FX100"')])
    assert code == 0, err


def test_a_missing_catalogue_is_refused(tmp_path, capsys):
    code, err, site, _ = check(tmp_path, capsys, site=[
        ('# catalog = "catalog/arrays.toml"', 'catalog = "no-such.toml"')])
    refused(code, err, site, "key 'site.catalog'", "no-such.toml")


# ---- a profile never relaxes a relative rule ------------------------------------------------

@pytest.mark.parametrize(("table", "key", "written", "base"), [
    ("g2", "cv_max", '"50 %"', '"5 %"'),
    ("g3", "ttft_p50_reduction_min", '"1 %"', '"25 %"'),
])
def test_a_profile_that_relaxes_a_relative_rule_is_refused(tmp_path, capsys, table, key,
                                                           written, base):
    code, err, _, th = check(tmp_path, capsys, thresholds=[(
        "[profiles.demo.g1]", f"[profiles.demo.{table}]\n{key} = {written}\n\n"
                              "[profiles.demo.g1]")])
    refused(code, err, th, f"key 'profiles.demo.{table}.{key}'", "profile 'demo'",
            written, f"{table}.{key} = {base}", "never relax")


def test_a_profile_may_tighten_a_relative_rule(tmp_path, capsys):
    code, err, _, _ = check(tmp_path, capsys, thresholds=[(
        "[profiles.demo.g1]", '[profiles.demo.g2]\ncv_max = "3 %"\n\n[profiles.demo.g1]')])
    assert code == 0, err


# ---- properties of each class --------------------------------------------------------------

BASE_SITE = {"site": {"name": "s"}, "target": {"directory": "/t"}, "fio": {"file_size": "1GiB"}}
_SIZE_UNITS = [*SIZE_UNITS, "KIB", "Mib", "EiB", "kB", " MiB", "x", "%", "/s", "MiB/s"]
_NUMBERS = st.one_of(st.integers(0, 10**22).map(str), st.decimals(
    0, 10**6, places=4, allow_nan=False, allow_infinity=False).map(str),
    st.sampled_from(["1e3", ".5", "5.", "-1", "1_000", "0x10"]))


@given(st.one_of(st.builds(lambda n, u: f"{n}{u}", _NUMBERS, st.sampled_from(_SIZE_UNITS)),
                 st.text(max_size=12)))
def test_a_written_size_is_what_it_says_or_refused_naming_the_key(text):
    data = BASE_SITE | {"fio": {"file_size": "1GiB", "kv_block": "4KiB", "seq_block": "4KiB",
                                "direct": False}, "target": {"directory": "/t", "min_free": text}}
    try:
        site = validate(Site, data, Path("site.toml"))
    except ConfigError as exc:
        assert "key 'target.min_free'" in str(exc) and repr(text) in str(exc), str(exc)
        return
    written = text.strip()
    unit = written.lstrip("0123456789.")
    said = Decimal(written.removesuffix(unit)) * SIZE_UNITS[unit.strip().lower() or "b"]
    assert site.target.min_free == int(said.to_integral_value(ROUND_HALF_UP))
    assert unit.strip() or said == 0  # a size with a unit, or zero
    assert site.target.min_free < 2**63


_RELATIVE = [(table, key, rule) for table, keys in RELATIVE.items() for key, rule in keys]


def _moved(table: str, key: str, rule: Relative, own: object, share: float) -> tuple:
    """(a looser value, a tighter one) for the key, each None where the key's range has none."""
    if rule.order:
        at = rule.order.index(own)
        return ((rule.order[at - 1] if at else None),
                (rule.order[at + 1] if at + 1 < len(rule.order) else None))
    model = type(getattr(load_thresholds(REPO / "thresholds.toml")[0], table))
    bounds = {type(m).__name__: getattr(m, type(m).__name__.lower())
              for m in model.model_fields[key].metadata if type(m).__name__ in ("Gt", "Ge",
                                                                                "Lt", "Le")}
    text = str(own)
    unit = " %" if text.endswith("%") else "s" if isinstance(own, str) else ""
    number = float(text.rstrip(" %")) if unit == " %" else (
        parse_duration(text) if unit else own)
    low = bounds.get("Ge", bounds.get("Gt", 0.0))
    high = bounds.get("Le", bounds.get("Lt", number * 4 + 4))
    up = number + (high - number) * share if high > number else None
    down = number - (number - low) * share if number > low else None
    if isinstance(own, int):
        up = math.ceil(up) if up is not None else None
        down = math.floor(down) if down is not None and math.floor(down) >= low else None
    if bounds.get("Gt") is not None and down is not None and down <= bounds["Gt"]:
        down = None
    looser, tighter = (up, down) if rule.stricter == "lower" else (down, up)
    return tuple(None if v is None else f"{v:.6g}{unit}" if unit else v
                 for v in (looser, tighter))


def _toml(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


@given(st.sampled_from(_RELATIVE), st.floats(0.05, 0.95))
def test_a_profile_value_that_loosens_a_relative_rule_is_refused(tmp_path_factory, case,
                                                                  share):
    table, key, rule = case
    text = (REPO / "thresholds.toml").read_text()
    own = getattr(load_thresholds(REPO / "thresholds.toml")[0], table).model_dump(
        mode="json")[key]
    path = tmp_path_factory.mktemp("th") / "thresholds.toml"
    for value, refuses in zip(_moved(table, key, rule, own, share), (True, False), strict=True):
        if value is None:
            continue
        path.write_text(text + f"\n[profiles.strict.{table}]\n{key} = {_toml(value)}\n")
        try:
            load_thresholds(path)
        except ConfigError as exc:
            message = str(exc)
            if refuses:
                assert f"key 'profiles.strict.{table}.{key}': profile 'strict' sets" in message
                assert f"{table}.{key} = {json.dumps(own)}" in message and "never relax" in message
                continue
            # A tighter value may be out of the key's own range, or its table's: not relaxed.
            assert "relax" not in message, message
            continue
        assert not refuses, f"{table}.{key} = {value!r} relaxes {own!r} but was accepted"


def test_every_relative_rule_has_a_direction():
    assert {("g2", "cv_max"), ("g3", "ttft_p50_reduction_min"), ("g4", "ttft_drift_max"),
            ("g4", "request_errors_max"), ("g2", "repetitions")} <= {
                (t, k) for t, k, _ in _RELATIVE}
    assert not {t for t, _, _ in _RELATIVE} & {"g1", "meta"}  # absolute figures: a profile's


@given(st.integers(1, 7200), st.integers(1, 3600), st.integers(0, 12))
def test_a_soak_the_files_accept_is_one_the_run_can_judge(duration, window, warmup):
    data = BASE_SITE | {"soak": {"duration": f"{duration}s", "window": f"{window}s",
                                 "warmup_windows": warmup}}
    site = validate(Site, data, Path("site.toml"))
    limits = load_thresholds(REPO / "thresholds.toml")[0]
    problems = both_files_problems(site, limits, "site.toml", "thresholds.toml")
    windows = math.ceil(duration / window - 1e-9)
    if problems:
        [(file, [message])] = problems
        assert file == "site.toml" and message.startswith("key 'soak.")
        assert window > duration or windows - warmup < ROUNDS
        return
    assert window <= duration and windows - warmup >= ROUNDS
    plan = soak_plan("r", site, limits.g4, 1.0)  # the run's own plan: SetupError if unjudgeable
    assert (plan.duration, plan.window, plan.warmup_windows) == (duration, window, warmup)
    assert plan.windows == soak_windows(duration, window)  # one count of windows, both sides
