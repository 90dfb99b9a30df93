"""A real vLLM that restores deliberately corrupted KV files FAILs G3's correctness rule (#29).

The near-tie rule (gates.inference.correctness) excuses a greedy flip between two almost equal
logits; it must never excuse a restore from corrupted KV. One real vLLM API server with
ExampleConnector (the G3 candidate as `prefer = "vllm"` generates it) and three cold recoveries
of the same small plan on it, each from an emptied KV directory and a reset prefix cache:

- files intact: the probe loads what the seed stored (the candidate as G3 measures it);
- files removed after the seed: the connector finds nothing and the probe is prefilled again
  (the recompute reference, on the same server, so the same arithmetic);
- files zeroed after the seed (their safetensors headers kept, every tensor byte 0: what a
  device returning holes would hand back): the probe loads them.

The intact restore must pass the rule against the reference and the zeroed one must fail it as
a mismatch, with the connector's own counter showing the zeroed files were really loaded.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
from pathlib import Path

import pytest

from gates.core.configuration.config import load_site, load_thresholds
from gates.engines.vllm import find_vllm, vllm_arms
from gates.inference import (
    ArmProcess,
    correctness,
    evict,
    prepare_kv_dir,
    repetition,
    run_cold_recovery,
)
from gates.loadgen import LoadSettings, workload_plan

pytestmark = [pytest.mark.real_engine, pytest.mark.skipif(
    find_vllm() is None, reason="vLLM is not installed: run `kvgate engine install vllm` (or "
    "`make engine`) to install it into ~/.cache/kvgate")]

CONTEXTS = 4  # one wave at concurrency 4: the three runs take seconds each after the start


def zero_tensors(kv_dir: Path) -> int:
    """Zero every tensor byte of the safetensors files under kv_dir (8-byte header length,
    the JSON header, then the data); their names and sizes stay. Returns the files zeroed."""
    files = sorted(kv_dir.rglob("*.safetensors"))
    for path in files:
        with path.open("r+b") as f:
            start = 8 + struct.unpack("<Q", f.read(8))[0]
            size = path.stat().st_size - start
            f.seek(start)
            f.write(bytes(size))
            f.flush()
            os.fsync(f.fileno())
    return len(files)


def remove_files(kv_dir: Path) -> int:
    """Remove what the seed stored: the probe then finds nothing to load."""
    found = [p for p in kv_dir.iterdir() if not p.name.startswith(".")]
    for path in found:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return len(found)


@pytest.fixture(scope="module")
def vllm(repo, tmp_path_factory):
    """The shipped site's vLLM candidate arm, started once, with its plan and settings."""
    root = tmp_path_factory.mktemp("vllm-corrupt")
    site, _ = load_site(repo / "site.toml")
    workload = site.engine_workload(site.engine.vllm.workload).model_copy(
        update={"contexts": CONTEXTS})
    arm = vllm_arms(find_vllm(site.engine.vllm.version), site.engine.vllm, root / "target")[
        "candidate"]
    (root / "target").mkdir()
    prepare_kv_dir("candidate", arm, root / "target")
    settings = LoadSettings(concurrency=CONTEXTS, stall_timeout=workload.stall_timeout,
                            output_detail=True)
    with ArmProcess("candidate", arm, root / "candidate.log") as process:
        yield process, arm, workload_plan(workload), settings


def cold(vllm, fault=None):
    """One cold recovery on the running server; fault(kv_dir) runs after the seed's writes
    settled and the prefix cache was reset, before the probe. Returns (repetition, what)."""
    process, arm, plan, settings = vllm
    prepare_kv_dir("candidate", arm, arm.kv_dir.parent)
    asyncio.run(evict(process.endpoints(), "reset", plan, settings))
    done: list[int] = []

    def hook() -> None:
        asyncio.run(evict(process.endpoints(), "reset", plan, settings))
        done.append(fault(arm.kv_dir))

    result = asyncio.run(run_cold_recovery(
        plan, process.endpoints(), settings, engine="vllm", metrics_urls=process.metrics_urls(),
        evict_hook=hook if fault else None, kv_dir=arm.kv_dir, pid=process.pid))
    assert not result.metrics_error, result.metrics_error
    return repetition("candidate", settings.concurrency, 0, result), done


@pytest.fixture(scope="module")
def runs(vllm):
    restored, _ = cold(vllm)
    recomputed, removed = cold(vllm, remove_files)
    zeroed, files = cold(vllm, zero_tensors)
    assert removed[0] > 0 and files[0] > 0, "the seed stored no KV file to remove or to zero"
    return restored, recomputed, zeroed


def judged(cand, reference, repo):
    g3 = load_thresholds(repo / "thresholds.toml")[0].g3
    return correctness(cand, reference, g3.correctness_tokens, g3.correctness_logprob_gap_max,
                       g3.correctness_tie_logprob_max, g3.correctness_tie_share_max)


def test_the_reference_recomputed_and_the_zeroed_files_were_loaded(runs):
    restored, recomputed, zeroed = runs
    expected = restored.evidence.expected_tokens
    assert restored.evidence.storage_read_tokens == expected > 0
    assert not recomputed.evidence.storage_read_tokens, "the reference loaded KV: not a recompute"
    assert zeroed.evidence.storage_read_tokens == expected, \
        "the zeroed files were not loaded: the probe did not restore the corrupted KV"


def test_an_intact_restore_passes_against_recompute(runs, repo):
    restored, recomputed, _ = runs
    m = judged(restored, recomputed, repo)
    assert m.value == 0 and m.outcome.value == "PASS", m.note


def test_a_restore_of_corrupted_kv_files_fails_as_a_mismatch(runs, repo):
    _, recomputed, zeroed = runs
    m = judged(zeroed, recomputed, repo)
    assert m.value >= 1 and m.outcome.value == "FAIL", m.note
    assert "the restored KV is not the KV that was stored" in m.note
