"""G3's storage-read rules account for every repetition of the level (issue #43): a probe whose
evidence (the engine's counters, the devices' bytes, /proc/PID/io) could not be read is "not
read" with why and counts against the rule through its Coverage, never a gap in a sum over the
probes that were read. On the real path: recorded expositions -> attribute -> each repetition's
ProbeEvidence -> storage_proof and the level's evidence chain (as gates.inference runs them).
The ranks of one level: test_proof_ranks_coverage.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.core.configuration import G3Limits
from gates.core.verdicts import G3, Outcome
from gates.inference import Repetition, g3_chains
from gates.proof import (
    ProofContext,
    StorageAttribution,
    attribute,
    chain_measurement,
    engine_evidence,
    parse_metrics,
    storage_proof,
)

DATA = Path(__file__).parent / "data" / "metrics"
# The simulator's recorded probe (tests/data/metrics/README.md): 8 contexts of 8,192 tokens,
# its "tiny" profile's 1,024 KV bytes per token.
EXPECTED, KV = 8 * 8192, 1024
NEEDED = EXPECTED * KV
SCRAPE_FAILED = "GET http://127.0.0.1:8000/metrics: [Errno 111] Connection refused"


def repetition(i: int, **update) -> Repetition:
    """Repetition i of the level as gates.inference builds it from a recorded probe: the
    attribution of the simulator's before/after scrapes, the devices' and the process's bytes."""
    a = attribute("kvgate-sim", parse_metrics((DATA / "kvgate-sim.before.prom").read_text()),
                  parse_metrics((DATA / "kvgate-sim.after.prom").read_text()))
    fields = dict(arm="candidate", concurrency=8, repetition=i, ttfts=[1.0],
                  output_throughput=10.0, sent=8, errors=0, expected_kv_tokens=EXPECTED,
                  device_read_bytes=NEEDED, process_read_bytes=NEEDED, probe_seconds=2.0,
                  **engine_evidence(a))
    return Repetition(**(fields | update))


def unscraped(i: int) -> Repetition:
    """A repetition whose scrape failed: phases.cold_recovery keeps an empty attribution and
    the error (gates/inference/phases.py)."""
    return repetition(i, metrics_error=SCRAPE_FAILED,
                      **engine_evidence(StorageAttribution(engine="kvgate-sim")))


def measured(reps: list[Repetition]) -> dict[str, object]:
    return {m.id: m for m in storage_proof(8, [r.evidence for r in reps], G3Limits(), KV)}


def chain(reps: list[Repetition], ctx: ProofContext | None = None):
    return chain_measurement("", g3_chains(reps, [], ctx or ProofContext(), KV)[8])


def test_a_healthy_level_reads_every_repetition_of_each_rule():
    out = measured([repetition(i) for i in range(3)])
    for id in ("g3.storage_read_fraction", "g3.gpu_hit_fraction", "g3.device_reads",
               "g3.process_reads"):
        m = out[id]
        assert m.outcome is Outcome.PASS, (id, m.note)
        assert (m.coverage.what, m.coverage.expected, m.coverage.read) == ("repetitions", 3, 3)
    whole = chain([repetition(i) for i in range(3)])
    assert whole.outcome is Outcome.PASS, whole.note
    assert whole.coverage.describe() == "repetitions read 3 of 3"


def test_a_repetition_whose_counters_could_not_be_read_is_named_not_read():
    out = measured([repetition(0), unscraped(1), repetition(2)])
    for id in ("g3.storage_read_fraction", "g3.gpu_hit_fraction"):
        m = out[id]
        assert m.outcome is Outcome.ERROR, (id, m.note)
        assert (m.coverage.expected, m.coverage.read) == (3, 2), id
        assert m.coverage.missing == [f"#2 {SCRAPE_FAILED}"], id
        assert m.note.startswith("repetitions read 2 of 3 (67%); not read: #2 GET http"), m.note


def test_a_repetition_whose_devices_were_not_read_is_an_error_not_a_site_without_devices():
    # Its disks' counters gave nothing (read failed); the other two read the target's devices.
    m = measured([repetition(0), repetition(1, device_read_bytes=None), repetition(2)])[
        "g3.device_reads"]
    assert m.outcome is Outcome.ERROR, m.note  # was NOT APPLICABLE: "no block device to watch"
    assert (m.coverage.expected, m.coverage.read) == (3, 2)
    assert m.coverage.missing[0].startswith("#2 the block devices' read bytes were not read")


def test_a_repetition_whose_process_io_was_not_read_counts_against_the_rule():
    out = measured([repetition(0), repetition(1), repetition(2, process_read_bytes=None)])
    m = out.get("g3.process_reads")  # was left out of the record altogether
    assert m is not None and m.outcome is Outcome.ERROR
    assert m.coverage.missing[0].startswith("#3 the engine's processes' read bytes")


def test_no_repetition_with_a_device_figure_is_still_a_fact_of_the_site():
    reps = [repetition(i, device_read_bytes=None) for i in range(3)]
    assert measured(reps)["g3.device_reads"].outcome is Outcome.NOT_APPLICABLE


def test_gpu_hits_found_in_the_repetitions_read_fail_whatever_the_unread_one_held():
    # Hits only add up: 2 % of the level's planned tokens in repetition 1 fails the eviction.
    hot = repetition(0, gpu_hit_tokens=0.02 * 3 * EXPECTED)
    m = measured([hot, unscraped(1), repetition(2)])["g3.gpu_hit_fraction"]
    assert m.outcome is Outcome.FAIL, m.note
    assert m.coverage.read == 2 and m.evidence[0].startswith("repetitions read 2 of 3")


def test_the_chain_counts_a_repetition_whose_devices_were_not_read_against_it():
    # Summed over the level, a device figure missing from one probe made the whole level's
    # device row vanish, and /proc/PID/io alone carried the storage side to a PASS.
    reps = [repetition(0), repetition(1, device_read_bytes=None), repetition(2)]
    m = chain(reps)
    assert m.outcome is Outcome.ERROR, m.note
    assert (m.coverage.expected, m.coverage.read) == (3, 2)
    [row] = [s for s in g3_chains(reps, [], ProofContext(), KV)[8]
             if s.signal.startswith("probes whose evidence")]
    assert row.agreement == "error"
    assert "repetitions read 2 of 3 (67%); not read: #2 the block devices' read bytes" in row.note


def test_the_chain_names_a_repetition_whose_scrape_failed():
    m = chain([repetition(0), repetition(1), unscraped(2)])
    assert m.outcome is Outcome.ERROR
    assert m.coverage.missing == [f"#3 {SCRAPE_FAILED}"]


def test_stamping_refuses_nothing_of_a_healthy_level():
    reps = [repetition(i) for i in range(3)]
    ms = storage_proof(8, [r.evidence for r in reps], G3Limits(), KV)
    ms.append(G3["g3.evidence_chain"].stamp(chain(reps), 8))
    for m in ms:
        assert G3[m.id].stamp(m, 8) == m  # the declaration's own check, again, by id
        assert m.coverage is not None and m.coverage.what == G3[m.id].over
    assert {m.outcome for m in ms} == {Outcome.PASS}


@pytest.mark.parametrize("broken", [unscraped(1), repetition(1, device_read_bytes=None)])
def test_stamping_accepts_what_a_level_with_an_unread_repetition_found(broken):
    reps = [repetition(0), broken, repetition(2)]
    ms = storage_proof(8, [r.evidence for r in reps], G3Limits(), KV)
    ms.append(G3["g3.evidence_chain"].stamp(chain(reps), 8))
    assert Outcome.PASS not in {m.outcome for m in ms if m.coverage and not m.coverage.complete}
