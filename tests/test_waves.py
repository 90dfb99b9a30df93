"""gates.core.waves and `kvgate config check`: a TTFT p50 between two waves of probes is warned."""

import subprocess
import sys

import pytest
from _edits import edited
from hypothesis import given
from hypothesis import strategies as st

from gates.core.configuration.waves import at_boundary, inside_every_wave, wave_warnings


@pytest.mark.parametrize(("contexts", "c", "boundary"), [
    (16, 8, True),    # probes 8 and 9: the last of wave 1, the first of wave 2
    (16, 16, False),  # one wave
    (24, 8, False),   # probes 12 and 13, both in wave 2
    (24, 16, False),
    (17, 8, False),   # odd: one middle probe
    (32, 16, True),
    (32, 8, True),
])
def test_boundary_cases(contexts, c, boundary):
    assert at_boundary(contexts, c) is boundary


def test_the_issue_example_is_warned_with_a_count_that_is_not():
    [text] = wave_warnings(16, [8, 16], "[workload] contexts")
    assert text.startswith("[workload] contexts = 16 at concurrency 8: the probes go out in "
                           "waves of 8 and the TTFT p50 (the mean of probes 8 and 9 of 16) "
                           "falls between wave 1 and wave 2")
    assert text.endswith("17 contexts keep it inside a wave at every level [8, 16]")
    assert wave_warnings(17, [8, 16], "x") == [] and wave_warnings(24, [8, 16], "x") == []


@given(st.lists(st.integers(1, 64), min_size=1, max_size=4), st.integers(1, 256))
def test_the_suggested_count_is_inside_a_wave_at_every_level(levels, start):
    n = inside_every_wave(levels, start)
    assert n >= max(start, *levels)
    assert not any(at_boundary(n, c) for c in levels)


def test_config_check_warns_and_still_accepts(tmp_path, repo):
    site = edited((repo / "site.toml").read_text(), "\ncontexts = 17 ", "\ncontexts = 16 ",
                  where="site.toml")
    (tmp_path / "site.toml").write_text(site)
    done = subprocess.run([sys.executable, "-m", "gates.cli", "config", "check", "--site",
                           str(tmp_path / "site.toml"), "--thresholds",
                           str(repo / "thresholds.toml")], capture_output=True, text=True,
                          timeout=60, env={"COLUMNS": "40", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert ("warning [workload] contexts = 16 at concurrency 8: the probes go out in waves of "
            "8") in done.stdout
