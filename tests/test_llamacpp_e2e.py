"""G2 then G3 end to end through `kvgate run`, against the real llama.cpp server.

Real llama-server processes (built by `kvgate engine install llamacpp`), real slot files in a
directory on the local disk, dropped from the page cache before every probe; the only thing
written by the test is the G1 record G2 stands on. Skipped, with the command to run, where the
engine is not installed.
"""

import shutil
import subprocess

import pytest
from _engine_e2e import engine_world, g2_on, g3_on, llamacpp_site
from _timing import G3_REPS, cpu_lines, timing_verdict
from test_g2g3_e2e import outcomes

from gates.core.configuration.config import load_thresholds
from gates.engines.llamacpp import find_install

pytestmark = [pytest.mark.real_engine, pytest.mark.skipif(
    find_install() is None, reason="llama.cpp is not installed: run `kvgate engine install "
    "llamacpp` (or `make engine`) to build it into ~/.cache/kvgate")]

# Concurrency 1: with two requests sharing llama.cpp's one thread, which of a pair is prefilled
# first is a race, and a median over four requests flipped between 1.3 s and 1.7 s (CV 17.6 %
# against g2.cv_max 5 %). One at a time, TTFT is the prefill itself.
C = "@ concurrency 1"




@pytest.fixture(scope="module")
def world(tmp_path_factory, repo):
    """A passing G1 record, a thresholds file for a small run, and the site file."""
    root = tmp_path_factory.mktemp("llamacpp-e2e")
    with engine_world(root, repo, llamacpp_site) as world:
        yield world


@pytest.fixture(scope="module")
def g2(world):
    return g2_on(world, timeout=600)


def test_g2_measures_the_real_engine(g2):
    ms = outcomes(g2)
    assert g2["facts"]["engine"].startswith("llama.cpp llama-server")
    assert "llama.cpp" in g2["tool_versions"]
    assert ms[f"Baseline request errors {C}"]["outcome"] == "PASS"
    assert ms[f"Baseline TTFT p50 {C}"]["value"] > 0
    assert any(p.startswith("evidence/g2-arm-baseline-c1-r") for p in g2["evidence"])


@pytest.fixture(scope="module")
def g3(world, g2):
    return g3_on(world, g2, timeout=600)


def test_g3_restores_the_kv_from_slot_files_on_the_target(g3):
    ms = outcomes(g3)
    assert ms[f"Candidate request errors {C}"]["outcome"] == "PASS"
    assert ms[f"KV tokens read from the candidate storage {C}"]["value"] == 100
    assert ms[f"KV tokens served from the GPU cache during the probe {C}"]["value"] == 0
    own = ms[f"Engine process's storage reads vs its KV restores {C}"]
    assert own["outcome"] == "PASS", own  # the page cache was dropped: restores read the disk
    assert "posix_fadvise(DONTNEED)" in g3["facts"]["page cache before each probe"]
    assert "bytes read per probe (restore)" in g3["facts"]


def test_g3_restoring_beats_recomputing(world, g3):
    ms = outcomes(g3)
    # Timing comparisons: a failure names the CPU other processes took meanwhile; a MARGINAL
    # while they took more than g2.other_cpu_max is accepted, and said (_timing.timing_verdict).
    busy = cpu_lines(world / "out", g3, G3_REPS)
    decided = timing_verdict(world / "out", g3, f"TTFT p50 reduction {C}",
                             load_thresholds(world / "thresholds.toml")[0].g2.other_cpu_max)
    assert ms[f"TTFT speed-up vs recompute {C}"]["value"] > 1, (
        ms[f"TTFT speed-up vs recompute {C}"], busy)
    # The recompute arm is the baseline's server (no tier): its control repetitions serve.
    assert g3["facts"]["recompute reference"].startswith("the G3 control baseline's")
    assert not any("g3-arm-recompute" in p for p in g3["evidence"])
    looks = g3["tables"][f"Sequential looks {C}"]
    assert not decided or looks["rows"][-1][2].endswith("→ PASS"), looks


def test_greedy_outputs_after_restore_equal_recompute(g3):
    m = outcomes(g3)["Outputs differing from recompute (first 8 tokens, concurrency 1)"]
    assert m["outcome"] == "PASS" and m["value"] == 0, m


def test_no_llama_server_is_left_behind(world, g3):
    leftover = subprocess.run(["pgrep", "-f", f"llama-server.*{world}"], capture_output=True,
                              text=True)
    assert shutil.which("pgrep") is None or not leftover.stdout.strip()
