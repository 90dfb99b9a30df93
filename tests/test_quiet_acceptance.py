"""#45 item 7: values that passed `config check` (or a command's options) and meant nothing.

Each is refused with the key (or option), the value and what to write: a G1 floor of 0 B/s
(passes every array) or an infinite one (none), a TOML boolean where a count is meant (Python
reads true as 1), an MTU no NIC has, a context longer than the simulator's engine takes, a
fraction where `kvgate proof` wants a percentage, a sweep size below one KV chunk, a site file
that starts with a UTF-8 byte-order mark, an array `kvgate compare` has no price for. The
property at the end looks for the rest of the class over every numeric key of the shipped files.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
from _configcheck import REPO, check, refused
from hypothesis import given, settings
from hypothesis import strategies as st
from test_compare import chain, gains

from gates.cli import main
from gates.core.configuration import ConfigError, Site, Thresholds, validate
from gates.core.configuration.config import read_document
from gates.store import Store


@pytest.mark.parametrize("old, new, key, says", [
    ('seq_read_bw_min = "5.0 GB/s"', 'seq_read_bw_min = "0 GB/s"', "g1.seq_read_bw_min",
     "out of range"),
    ('seq_read_bw_min = "5.0 GB/s"', "seq_read_bw_min = inf", "g1.seq_read_bw_min", "inf"),
    ("randread_4k_iops_min = 200000", "randread_4k_iops_min = inf", "g1.randread_4k_iops_min",
     "inf"),
    ("repetitions = 3 ", "repetitions = true ", "g2.repetitions", "boolean"),
])
def test_a_limit_that_means_nothing_is_refused(tmp_path, capsys, old, new, key, says):
    code, err, _, th = check(tmp_path, capsys, thresholds=[(old, new)])
    refused(code, err, th, f"key '{key}'", says)


@pytest.mark.parametrize("old, new, key, says", [
    ("# mtu = 4200", "mtu = 70000", "topology.mtu", "65535"),
    ("context_tokens = 2048 ", "context_tokens = 70000 ", "workload.context_tokens", "65,536"),
    ('sizes = []', 'sizes = ["1KiB"]', "sweep.sizes[0]", "16 KiB"),
    ("seed = 0 ", "seed = false ", "workload.seed", "boolean"),
])
def test_a_site_value_no_hardware_or_engine_takes_is_refused(tmp_path, capsys, old, new, key,
                                                              says):
    code, err, site, _ = check(tmp_path, capsys, site=[(old, new)])
    refused(code, err, site, f"key '{key}'", says)


def test_a_site_file_with_a_byte_order_mark_is_named(tmp_path, capsys):
    text = "\ufeff" + (REPO / "site.toml").read_text()
    code, err, site, _ = check(tmp_path, capsys, site_text=text)
    refused(code, err, site, "byte-order mark", "without")


def test_a_fraction_where_proof_wants_a_percentage_is_refused(tmp_path, capsys):
    scrape = tmp_path / "m.prom"
    scrape.write_text("")
    common = ["proof", "--engine", "kvgate-sim", "--before", str(scrape), "--after",
              str(scrape), "--expected-tokens", "100"]
    assert main([*common, "--read-fraction-min", "0.9"]) == 2
    said = capsys.readouterr()
    err = said.out + said.err
    assert "--read-fraction-min: '0.9' would be read as 0.9 %" in err and "write 90" in err, err
    main([*common, "--read-fraction-min", "0.9%"])  # said with its unit: taken as written
    said = capsys.readouterr()
    assert "would be read as" not in said.out + said.err


def test_an_array_the_catalogue_does_not_have_is_refused_by_compare(tmp_path, capsys):
    with Store(tmp_path) as store:
        chain(store, "run-fast", gains(60.0, 45.0))
        chain(store, "run-slow", gains(30.0, 31.0))
    capsys.readouterr()
    code = main(["compare", "run-slow=FX999", "run-fast=FX300", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "FX999" in err and "FX100" in err, err
    assert not list(tmp_path.glob("compare-*"))


# ---- the rest of the class -------------------------------------------------------------------

def _leaves(data: dict, prefix: tuple = ()):
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _leaves(value, (*prefix, key))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield (*prefix, key), value


def _numeric(name: str) -> tuple[type, dict, list]:
    model = {"site.toml": Site, "thresholds.toml": Thresholds}[name]
    data, _ = read_document(REPO / name)
    data.pop("profiles", None)
    return model, data, sorted(_leaves(data))


HOSTILE = st.sampled_from([True, False, math.inf, -math.inf, math.nan, -1, -0.5])


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["site.toml", "thresholds.toml"]), pick=st.integers(0, 10**6),
       value=HOSTILE)
def test_every_numeric_key_refuses_a_boolean_an_infinity_and_a_negative_naming_itself(
        name, pick, value):
    model, data, leaves = _numeric(name)
    path, _ = leaves[pick % len(leaves)]
    edited = copy.deepcopy(data)
    here = edited
    for part in path[:-1]:
        here = here[part]
    here[path[-1]] = value
    key = ".".join(path)
    with pytest.raises(ConfigError) as refusal:
        validate(model, edited, Path(name))
    assert f"key '{key}'" in str(refusal.value), str(refusal.value)


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(["site.toml", "thresholds.toml"]), pick=st.integers(0, 10**6),
       unknown=st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True))
def test_an_unknown_key_is_named(name, pick, unknown):
    model, data, leaves = _numeric(name)
    path, _ = leaves[pick % len(leaves)]
    edited = copy.deepcopy(data)
    here = edited
    for part in path[:-1]:
        here = here[part]
    if unknown in here or unknown in model.model_fields:
        return
    here[unknown] = 1
    with pytest.raises(ConfigError) as refusal:
        validate(model, edited, Path(name))
    said = str(refusal.value)
    assert f"'{'.'.join((*path[:-1], unknown))}'" in said and "unknown key" in said, said


def test_the_simulators_context_limits_are_the_simulators_own():
    from gates.core.configuration.engine_limits import SIM_DEFAULT_PROFILE, SIM_MAX_MODEL_LEN
    from gates.sim.cli import build_parser
    from gates.sim.model import PROFILES

    assert {name: p.max_model_len for name, p in PROFILES.items()} == SIM_MAX_MODEL_LEN
    assert build_parser().get_default("profile") == SIM_DEFAULT_PROFILE
