"""gates.core.config and gates.core.settings: loading thresholds.toml and site.toml, errors."""

from pathlib import Path

import pytest
from _edits import edited

from gates.core.configuration import ConfigError, load_site
from gates.core.configuration.config import load_thresholds

ROOT = Path(__file__).resolve().parent.parent

THRESHOLDS = """\
[meta]
revision = "t-1"

[g1]
seq_read_bw_min = "5 GB/s"
seq_write_bw_min = "3 GB/s"
kv_restore_bw_min = "5 GB/s"
randread_4k_qd1_p99_max = "500us"
randread_4k_iops_min = 200000

[profiles.demo]
description = "small"

[profiles.demo.g1]
seq_read_bw_min = "50 MB/s"
"""

SITE = """\
[site]
name = "lab"

[target]
directory = "scratch"

[fio]
file_size = "1GiB"
runtime = "30s"
steady_state = { criterion = "bw:20%", window = "10s", ramp = "2s" }
"""


def write(tmp_path: Path, text: str, name: str = "file.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def site_error(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path, text, "site.toml")
    with pytest.raises(ConfigError) as info:
        load_site(path)
    assert info.value.file == str(path)
    assert str(path) in str(info.value)
    return info.value


def thresholds_error(tmp_path: Path, text: str, profile: str = "") -> ConfigError:
    path = write(tmp_path, text, "thresholds.toml")
    with pytest.raises(ConfigError) as info:
        load_thresholds(path, profile)
    assert info.value.file == str(path)
    assert str(path) in str(info.value)
    return info.value


# ---- the shipped files -----------------------------------------------------------------

def test_shipped_thresholds_load_with_and_without_the_demo_profile():
    plain, loaded = load_thresholds(ROOT / "thresholds.toml")
    demo, _ = load_thresholds(ROOT / "thresholds.toml", "demo")
    assert plain.profile == ""
    assert plain.g1.seq_read_bw_min == 5e9
    assert demo.profile == "demo"
    assert demo.profile_description.startswith("DEMO")
    assert demo.g1.seq_read_bw_min == 50e6
    assert demo.g1.randread_4k_qd1_p99_max == pytest.approx(20e-3)
    # Relative rules are never relaxed by the profile.
    assert demo.g3.ttft_p50_reduction_min == plain.g3.ttft_p50_reduction_min == 25
    assert demo.g2 == plain.g2 and demo.g4 == plain.g4
    assert len(loaded.sha256) == 64 and loaded.path.endswith("thresholds.toml")


def test_profile_fields_are_not_dumped():
    demo, _ = load_thresholds(ROOT / "thresholds.toml", "demo")
    assert "profile" not in demo.model_dump()


def test_shipped_site_loads_and_its_target_is_next_to_it():
    site, loaded = load_site(ROOT / "site.toml")
    assert site.target.directory.is_absolute()
    assert site.target.directory.parent == ROOT
    assert site.site.limits_profile == "demo"
    assert len(loaded.sha256) == 64
    # The shipped site's profile exists in the shipped thresholds.
    load_thresholds(ROOT / "thresholds.toml", site.site.limits_profile)


def test_minimal_files_load(tmp_path):
    thresholds, _ = load_thresholds(write(tmp_path, THRESHOLDS))
    assert thresholds.g1.randread_4k_qd1_p99_max == pytest.approx(500e-6)
    site, _ = load_site(write(tmp_path, SITE, "site.toml"))
    assert site.fio.file_size == 1024**3
    assert site.fio.runtime == 30.0


def test_sha256_is_of_the_file_bytes(tmp_path):
    import hashlib

    path = write(tmp_path, THRESHOLDS)
    _, loaded = load_thresholds(path)
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


# ---- unknown keys ----------------------------------------------------------------------

def test_typo_in_fio_names_file_key_and_suggestion(tmp_path):
    error = site_error(tmp_path, SITE.replace('runtime = "30s"', 'runtme = "30s"'))
    assert error.problems == ["unknown key 'fio.runtme' — did you mean 'runtime'?"]
    assert "fio.runtme" in str(error) and "did you mean 'runtime'" in str(error)


def test_typo_in_a_nested_table(tmp_path):
    error = site_error(tmp_path, SITE.replace("window =", "windw ="))
    assert "fio.steady_state.windw" in str(error)
    assert "did you mean 'window'" in str(error)


def test_unknown_top_level_table(tmp_path):
    error = site_error(tmp_path, SITE + '\n[topolgy]\ntransport = "tcp"\n')
    assert "unknown key 'topolgy'" in str(error)
    assert "did you mean 'topology'" in str(error)


def test_unknown_key_without_a_close_match_lists_the_known_ones(tmp_path):
    error = site_error(tmp_path, SITE + "\n[ceilings]\nzzz = 1\n")
    assert "unknown key 'ceilings.zzz'" in str(error)
    assert "known keys: read_bw, write_bw, label" in str(error)


def test_loader_only_fields_cannot_be_set_from_the_file(tmp_path):
    error = thresholds_error(tmp_path, 'profile = "demo"\n' + THRESHOLDS)
    assert "unknown key 'profile'" in str(error)


def test_known_keys_do_not_offer_loader_only_fields(tmp_path):
    error = thresholds_error(tmp_path, THRESHOLDS + "\n[zzz]\nx = 1\n")
    assert "profile" not in str(error).split("known keys")[-1]


# ---- wrong values ----------------------------------------------------------------------

def test_wrong_type_names_key_and_file(tmp_path):
    error = site_error(tmp_path, SITE.replace('"1GiB"', '"lots"'))
    assert len(error.problems) == 1
    assert "fio.file_size" in error.problems[0]
    assert "'lots' is not a size" in error.problems[0]


def test_wrong_unit(tmp_path):
    error = site_error(tmp_path, SITE.replace('"1GiB"', '"2 parsecs"'))
    assert "fio.file_size" in str(error)
    assert "unknown size unit 'parsecs'" in str(error)


def test_wrong_unit_in_thresholds(tmp_path):
    error = thresholds_error(tmp_path, THRESHOLDS.replace('"500us"', '"500 fortnights"'))
    assert "g1.randread_4k_qd1_p99_max" in str(error)
    assert "fortnights" in str(error)


def test_bits_where_bytes_were_meant_are_a_different_number(tmp_path):
    thresholds, _ = load_thresholds(write(tmp_path, THRESHOLDS.replace('"5 GB/s"', '"40 Gb/s"')))
    assert thresholds.g1.seq_read_bw_min == 5e9


def test_not_a_number(tmp_path):
    error = site_error(tmp_path, SITE + "\n[topology]\nmembers = \"four\"\n")
    assert "topology.members" in str(error)


def test_list_item_is_named_by_index(tmp_path):
    error = site_error(tmp_path, SITE.replace("[fio]\n", "[fio]\nqd_sweep = [1, 0, 4]\n"))
    assert "fio.qd_sweep[1]" in str(error)


def test_several_problems_are_all_reported(tmp_path):
    text = SITE.replace('"1GiB"', '"lots"').replace('runtime = "30s"', 'runtme = "30s"')
    error = site_error(tmp_path, text)
    assert len(error.problems) == 2
    assert all(p in str(error) for p in error.problems)


def test_missing_required_key(tmp_path):
    error = site_error(tmp_path, SITE.replace('file_size = "1GiB"\n', ""))
    assert error.problems == ["missing key 'fio.file_size'"]


def test_missing_required_table(tmp_path):
    error = thresholds_error(tmp_path, THRESHOLDS.replace('[meta]\nrevision = "t-1"\n', ""))
    assert "missing key 'meta'" in str(error)


def test_invalid_toml_names_the_file(tmp_path):
    error = site_error(tmp_path, SITE + "\nbroken = = 1\n")
    assert "not valid TOML" in str(error)
    assert "line 12" in str(error)


def test_config_error_text():
    one = ConfigError("a.toml", ["only problem"])
    assert str(one) == "a.toml: only problem"
    two = ConfigError("a.toml", ["first", "second"])
    assert str(two) == "a.toml:\n  first\n  second"
    assert str(ConfigError("a.toml", [])).startswith("a.toml: ")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found") as info:
        load_site(tmp_path / "nope.toml")
    assert info.value.file == str(tmp_path / "nope.toml")


def test_bad_choice(tmp_path):
    error = site_error(tmp_path, SITE + '\n[topology]\ntransport = "carrier pigeon"\n')
    assert "topology.transport" in str(error)


def test_bad_steady_state_criterion(tmp_path):
    error = site_error(tmp_path, SITE.replace("bw:20%", "bw:lots"))
    assert "fio.steady_state.criterion" in str(error)
    assert "ss= form" in str(error)


def test_steady_state_window_must_hold_the_snia_rounds(tmp_path):
    error = site_error(tmp_path, SITE.replace('window = "10s"', 'window = "3s"'))
    assert "fio.steady_state.window" in str(error)
    assert "at least 5s" in str(error)


def test_marginal_band_must_be_below_100_percent(tmp_path):
    error = thresholds_error(tmp_path, THRESHOLDS + '\n[decision]\nmarginal_band = "100 %"\n')
    assert "decision.marginal_band" in str(error)


def test_negative_number_is_rejected(tmp_path):
    error = site_error(tmp_path, SITE.replace('[target]\n', '[target]\nmin_free = -1\n'))
    assert "target.min_free" in str(error)


def test_nan_duration_is_rejected(tmp_path):
    error = site_error(tmp_path, SITE.replace('runtime = "30s"', "runtime = nan"))
    assert "fio.runtime" in str(error)


def test_g3_band_must_be_in_order(tmp_path):
    text = (THRESHOLDS + '\n[g3]\nthroughput_gain_min = "50 %"\n'
            'throughput_gain_claimed_max = "40 %"\n')
    error = thresholds_error(tmp_path, text)
    assert "g3" in str(error) and "throughput_gain_min" in str(error)


# ---- profiles --------------------------------------------------------------------------

def test_unknown_profile_suggests_the_close_one(tmp_path):
    error = thresholds_error(tmp_path, THRESHOLDS, profile="dmeo")
    assert "no limits profile 'dmeo'" in str(error)
    assert "did you mean 'demo'" in str(error)


def test_typo_in_an_unselected_profile_is_caught(tmp_path):
    text = THRESHOLDS.replace('seq_read_bw_min = "50 MB/s"', 'seq_raed_bw_min = "50 MB/s"')
    error = thresholds_error(tmp_path, text)  # no profile selected
    assert "profiles.demo.g1.seq_raed_bw_min" in str(error)
    assert "did you mean 'seq_read_bw_min'" in str(error)


def test_wrong_value_in_an_unselected_profile_is_caught(tmp_path):
    text = THRESHOLDS.replace('"50 MB/s"', '"50 parsecs"')
    error = thresholds_error(tmp_path, text)
    assert "profiles.demo.g1.seq_read_bw_min" in str(error)


def test_profile_that_is_not_a_table(tmp_path):
    text = 'profiles = { demo = "x" }\n' + THRESHOLDS.split("[profiles.demo]")[0]
    error = thresholds_error(tmp_path, text, profile="demo")
    assert "profiles.demo" in str(error) and "table" in str(error)


def test_profile_only_overrides_what_it_names(tmp_path):
    thresholds, _ = load_thresholds(write(tmp_path, THRESHOLDS), "demo")
    assert thresholds.g1.seq_read_bw_min == 50e6
    assert thresholds.g1.seq_write_bw_min == 3e9
    assert thresholds.profile_description == "small"


# ---- paths and cross-field rules -------------------------------------------------------

def test_relative_target_is_resolved_against_the_site_file(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(folder, SITE, "site.toml")
    monkeypatch.chdir(elsewhere)
    site, _ = load_site(Path("..") / "conf" / "site.toml")
    assert site.target.directory == folder.resolve() / "scratch"


def test_absolute_target_is_kept(tmp_path):
    target = tmp_path / "abs"
    site, _ = load_site(write(tmp_path, SITE.replace('"scratch"', f'"{target}"'), "site.toml"))
    assert site.target.directory == target


def test_runtime_shorter_than_ramp_and_window_is_a_clear_error(tmp_path):
    error = site_error(tmp_path, SITE.replace('runtime = "30s"', 'runtime = "8s"'))
    assert len(error.problems) == 1
    problem = error.problems[0]
    assert problem.startswith("key 'fio':")
    assert "runtime 8s" in problem and "13s" in problem  # ramp 2s + window 10s + 1s


@pytest.mark.parametrize("host", ["", " 10.0.0.1", "a,b", "a b"])
def test_fio_hosts_must_be_plain_names(tmp_path, repo, host):
    site = tmp_path / "site.toml"
    text = edited((repo / "site.toml").read_text(), 'binary = "fio"',
                  f'binary = "fio"\nhosts = ["{host}"]', where="site.toml")
    site.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_site(site)
    assert "fio.hosts" in str(err.value) and "fio --client" in str(err.value)
