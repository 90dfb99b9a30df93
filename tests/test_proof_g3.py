"""G3 and `kvgate proof` on the same recorded probe reach the same verdict (issue #25 item 7),
and G3 holds the storage side against the bytes the engine's tokens need, not only against its
byte counter (item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.cli import main
from gates.core.configuration import G3Limits
from gates.core.verdicts import Outcome
from gates.inference import Repetition, g3_chains, g3_measurements
from gates.proof import ProofContext, attribute, chain_measurement, engine_evidence, parse_metrics
from gates.proof.measurements import storage_proof

DATA = Path(__file__).parent / "data" / "metrics"
KV = 131072
EXPECTED = 8192
NEEDED = EXPECTED * KV


def evidence(reps):
    """Each repetition's probe evidence: what G3's storage measurements take."""
    return [r.evidence for r in reps]


def scrape(names: list[str], when: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{'+'.join(names)}.{when}.prom"
    path.write_text("".join((DATA / f"{n}.{when}.prom").read_text() for n in names))
    return path


def repetition(engine: str, before: Path, after: Path, device: int | None,
               expected: int = EXPECTED) -> Repetition:
    """The repetition G3 makes of this probe (gates.inference.repetition, as far as a recorded
    pair can say): the attribution's figures, the devices' bytes, the expected tokens."""
    a = attribute(engine, parse_metrics(before.read_text()), parse_metrics(after.read_text()))
    return Repetition(arm="candidate", concurrency=1, repetition=0, ttfts=[1.0],
                      output_throughput=10.0, sent=1, errors=0, expected_kv_tokens=expected,
                      device_read_bytes=device, **engine_evidence(a))


def g3_verdict(reps: list[Repetition], kv: int = KV) -> str:
    """G3's verdict on the proof: its storage measurements and the evidence chain together."""
    chains = g3_chains(reps, [], ProofContext(), kv)
    ms = storage_proof(1, evidence(reps), G3Limits(), kv) + [chain_measurement("chain", chains[1])]
    outcomes = {m.outcome for m in ms}
    if Outcome.FAIL in outcomes:
        return "FAIL"
    return "PASS" if outcomes <= {Outcome.PASS, Outcome.NOT_APPLICABLE} else "not decided"


def offline_verdict(capsys, engine: str, before: Path, after: Path, device: int | None,
                    expected: int = EXPECTED, kv: int = KV) -> str:
    code = main(["proof", "--engine", engine, "--before", str(before), "--after", str(after),
                 "--expected-tokens", str(expected), "--kv-bytes-per-token", str(kv),
                 *(["--device-bytes", str(device)] if device is not None else [])])
    capsys.readouterr()
    return {0: "PASS", 1: "FAIL"}.get(code, "not decided")


QWEN06 = 114_688  # Qwen3-0.6B: 28 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
CASES = [
    # No GPU-hit counter (lmcache:* alone): G3 errs, so the offline proof may not pass.
    ("lmcache", ["lmcache-tp8"], None, NEEDED, "not decided"),
    ("lmcache", ["lmcache-tp8", "vllm"], None, NEEDED, "PASS"),
    ("lmcache", ["lmcache-tp8", "vllm"], ["lmcache-tp8-rank3-zero", "vllm"], NEEDED, "FAIL"),
    ("lmcache", ["lmcache-tp8", "vllm"], None, NEEDED // 2, "FAIL"),
    ("lmcache", ["lmcache-tp8", "vllm"], None, None, "not decided"),
    ("sglang", ["sglang-tp8"], None, NEEDED, "PASS"),
    ("sglang", ["sglang-tp8"], ["sglang-tp8-rank5-zero"], NEEDED, "FAIL"),
    ("vllm-native", ["vllm-native"], None, EXPECTED * QWEN06, "PASS"),
    ("vllm-native", ["vllm-native"], None, 3 * EXPECTED * QWEN06, "not decided"),
    ("kvgate-sim", ["kvgate-sim"], None, 8 * EXPECTED * 1024, "PASS"),
]


@pytest.mark.parametrize("engine, names, after, device, verdict", CASES)
def test_g3_and_kvgate_proof_reach_the_same_verdict_on_one_recorded_probe(
        capsys, tmp_path, engine, names, after, device, verdict):
    before_path = scrape(names, "before", tmp_path)
    after_path = scrape(after or names, "after", tmp_path)
    # The recordings' own model geometry: the simulator's "tiny" profile reads 8 contexts.
    expected, kv = {"vllm-native": (EXPECTED, QWEN06), "kvgate-sim": (8 * EXPECTED, 1024)}.get(
        engine, (EXPECTED, KV))
    rep = repetition(engine, before_path, after_path, device, expected)
    offline = offline_verdict(capsys, engine, before_path, after_path, device, expected, kv)
    assert (g3_verdict([rep], kv), offline) == (verdict, verdict)


def lmcache_like(read_share: float) -> Repetition:
    """A probe whose tier-blind token counter claims every token from storage while only
    read_share of them came from it (LMCache: its token counter counts the CPU tier too, its
    byte counter only the remote backend); bytes, devices and /proc/PID/io all honest."""
    honest = int(NEEDED * read_share)
    return Repetition(
        arm="candidate", concurrency=8, repetition=0, ttfts=[1.0, 1.1], output_throughput=150.0,
        sent=2, errors=0, storage_read_tokens=float(EXPECTED), storage_read_bytes=float(honest),
        gpu_hit_tokens=0.0, expected_kv_tokens=EXPECTED, device_read_bytes=honest,
        process_read_bytes=honest, caveat="tier-blind: lmcache:num_hit_tokens counts tokens "
        "served by any LMCache backend, its CPU (DRAM) backend included", probe_seconds=2.0)


def test_storage_side_bytes_are_held_against_the_bytes_the_tokens_need():
    from gates.core.configuration import Decision
    from gates.inference import Repetition as Rep

    base = [Rep(arm="baseline", concurrency=8, repetition=i, ttfts=[2.0, 2.2], sent=2,
                errors=0, output_throughput=100.0 + i) for i in range(2)]
    for share, chain_outcome in ((0.5, Outcome.FAIL), (1.0, Outcome.PASS)):
        cand = [lmcache_like(share).model_copy(update={"repetition": i}) for i in range(2)]
        chains = g3_chains(cand, [], ProofContext(), KV)  # as suites/test_g3_main.py does
        pairs = {8: list(zip(base, cand, strict=True))}  # G3's pairs, as g3_pairs runs them
        out = {m.id: m for m in g3_measurements(pairs, [], G3Limits(), Decision(), chains,
                                                kv_bytes_per_token=KV)}
        chain = out["g3.evidence_chain"]
        assert chain.outcome is chain_outcome, chain.note
        assert (out["g3.device_reads"].outcome is Outcome.FAIL) == (share < 1)
    chains = g3_chains([lmcache_like(0.5)], [], ProofContext(), KV)
    [row] = [s for s in chains[8] if s.signal.startswith("the engine's read bytes vs its tokens")]
    assert row.agreement == "disagrees" and "some of those tokens came from elsewhere" in row.note
