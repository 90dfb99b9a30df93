"""gates.proof.evidence and controls: the chain's verdict, physics and the working set."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gates.core.verdicts import Outcome
from gates.proof import (
    ProbeEvidence,
    ProofContext,
    Signal,
    StorageReads,
    chain_measurement,
    judge_chain,
    probe_chain,
)
from gates.proof.controls import restore_physics, working_set
from gates.proof.evidence import Agreement, Kind, within

ENGINE = Signal(kind=Kind.ENGINE, signal="vllm:external_prefix_cache_hits_total", value=8192,
                unit="tokens", expected="≥ 7,373 tokens", agreement=Agreement.AGREES)
DEVICE = Signal(kind=Kind.STORAGE, signal="block devices nvme0n1", value=1.0e9, unit="bytes",
                expected="90-150 % of the engine's", agreement=Agreement.AGREES)


def test_a_complete_chain_passes_and_names_its_signals():
    verdict = judge_chain([ENGINE, DEVICE])
    assert verdict.outcome is Outcome.PASS and "nvme0n1" in verdict.reason


def test_a_disagreeing_signal_fails_the_chain_by_name():
    rank = Signal(kind=Kind.ENGINE, signal='lmcache:num_hit_tokens_total{worker_id="3"}',
                  value=0, unit="tokens", expected="≥ 7,373 tokens",
                  agreement=Agreement.DISAGREES)
    verdict = judge_chain([ENGINE, DEVICE, rank])
    assert verdict.outcome is Outcome.FAIL and 'worker_id="3"' in verdict.reason


def test_no_storage_side_signal_is_inconclusive_never_a_pass():
    verdict = judge_chain([ENGINE])
    assert verdict.inconclusive and "no storage-side signal" in verdict.reason
    m = chain_measurement("proof", [ENGINE])
    assert m.outcome is Outcome.ERROR and m.note.startswith("INCONCLUSIVE")


def test_a_caveated_counter_passes_only_with_a_control_agreeing():
    ahead = ENGINE.model_copy(update={"signal": "kvbm_onboard_blocks_d2d",
                                      "caveat": "counted before the transfer"})
    verdict = judge_chain([ahead, DEVICE])
    assert verdict.inconclusive and "counted before the transfer" in verdict.reason
    control = working_set(64 * 2**30, 24 * 2**30, None, None, False)
    assert judge_chain([ahead, DEVICE, control]).outcome is Outcome.PASS


def test_an_inconclusive_control_makes_the_chain_inconclusive():
    ws = working_set(10 * 2**20, 24 * 2**30, None, page_cache=None, devices_agree=False)
    assert ws.agreement is Agreement.INCONCLUSIVE and "fits in the host" in ws.note
    assert judge_chain([ENGINE, DEVICE, ws]).inconclusive


def test_a_cpu_tier_that_holds_the_working_set_voids_the_probe_even_where_counters_disagree():
    # The probe, as configured, could not examine the storage: the engine's counters saying
    # "not read from storage" judge the setup, not the array, so no FAIL (nor a PASS).
    tier = working_set(2**30, 24 * 2**30, 4 * 2**30, None, True)
    unread = ENGINE.model_copy(update={"value": 0, "agreement": Agreement.DISAGREES})
    verdict = judge_chain([unread, DEVICE, tier])
    assert verdict.inconclusive and verdict.word == "INCONCLUSIVE", verdict
    assert "can hold the whole working set" in verdict.reason
    assert f"so {ENGINE.signal} disagrees without judging the storage" in verdict.reason
    # a control that cannot tell memory from storage does not void the probe: FAIL stays
    fits = working_set(10 * 2**20, 24 * 2**30, None, None, False)
    assert judge_chain([unread, DEVICE, fits]).outcome is Outcome.FAIL
    # a signal that could not be read is still an ERROR first
    broken = DEVICE.model_copy(update={"agreement": Agreement.ERROR, "note": "unreadable"})
    assert judge_chain([broken, tier]).word == "ERROR"


@given(st.permutations([ENGINE, DEVICE, ENGINE.model_copy(update={"signal": "rank 1"}),
                        Signal(kind=Kind.CONTROL, signal="c", agreement=Agreement.ABSENT)]))
def test_the_order_of_the_signals_never_changes_the_verdict(signals):
    assert judge_chain(signals).outcome is Outcome.PASS


def test_physics_fails_a_restore_faster_than_the_storage():
    # 114 GB in 14 s is 8.1 GB/s: fine against 8.12 GB/s; in 5 s it is impossible.
    assert restore_physics(114e9, 14.0, 8.12e9, 12.5e9).agreement is Agreement.AGREES
    fast = restore_physics(114e9, 5.0, 8.12e9, 12.5e9)
    assert fast.agreement is Agreement.DISAGREES and "somewhere else" in fast.note
    assert "G1 KV-restore" in fast.expected
    assert restore_physics(114e9, 5.0, None, None).agreement is Agreement.ABSENT


def test_working_set_rules():
    big = working_set(64 * 2**30, 24 * 2**30, None, None, False)
    assert big.agreement is Agreement.AGREES
    proven = working_set(2**20, 24 * 2**30, None, None, devices_agree=True)
    assert proven.agreement is Agreement.AGREES and "devices" in proven.note
    # Only a drop mincore verified rules memory out (#43): one that left pages does not.
    from gates.proof import CacheDrop
    verified = CacheDrop(files=1, bytes=2**20, resident_before=2**20, resident_after=0)
    dropped = working_set(2**20, 24 * 2**30, None, page_cache=verified, devices_agree=False)
    assert dropped.agreement is Agreement.AGREES and dropped.rules_out_memory
    left = verified.model_copy(update={"resident_after": 2**19})
    kept = working_set(2**20, 24 * 2**30, None, page_cache=left, devices_agree=False)
    assert kept.agreement is Agreement.INCONCLUSIVE and not kept.rules_out_memory
    assert "524,288 of 1,048,576 bytes" in kept.note
    tier = working_set(2**30, 24 * 2**30, 4 * 2**30, None, True)
    assert tier.agreement is Agreement.INCONCLUSIVE and "CPU tier" in tier.note


def test_within():
    assert within(None, 1) is Agreement.ABSENT
    assert within(95, 90, 150) is Agreement.AGREES
    assert within(151, 90, 150) is Agreement.DISAGREES and within(89, 90) is Agreement.DISAGREES


def test_an_unreadable_exposition_makes_the_proof_inconclusive_with_the_reason():
    from gates.proof import ProbeEvidence, ProofContext, probe_chain

    evidence = ProbeEvidence(expected_tokens=8192, repetitions=1,
                             error="metrics: http://h:8000/metrics: line 3: vllm:x: bad value")
    verdict = judge_chain(probe_chain(evidence, ProofContext()))
    assert verdict.inconclusive and "line 3" in verdict.reason


def _devices_chain(device_pct: float):
    need = 1000 * 8192
    p = ProbeEvidence(engine="vllm", expected_tokens=1000, kv_bytes_per_token=8192,
                      storage_read_tokens=1000.0, gpu_hit_tokens=0.0, probe_seconds=1.0,
                      storage=StorageReads(device_bytes=int(need * device_pct / 100)),
                      repetitions=1)
    return probe_chain(p, ProofContext(read_fraction_min=90.0, band=(90.0, 150.0)))


def test_devices_reading_more_than_the_probe_needed_cannot_say_yes_or_no():
    # Another process read the same device during the probe: the engine's reads may or may
    # not be among them, so the chain is INCONCLUSIVE (an ERROR with what to do), not a FAIL.
    chain = _devices_chain(400.0)
    [row] = [s for s in chain if s.signal == "block devices"]
    assert row.agreement is Agreement.INCONCLUSIVE and "other I/O on them" in row.note
    assert "otherwise idle" in row.note
    assert judge_chain(chain).outcome is Outcome.ERROR


def test_devices_reading_less_than_the_probe_needed_disagree():
    chain = _devices_chain(20.0)
    [row] = [s for s in chain if s.signal == "block devices"]
    assert row.agreement is Agreement.DISAGREES
    assert judge_chain(chain).outcome is Outcome.FAIL


def test_a_row_that_could_not_be_read_makes_the_chain_an_error_before_any_fail():
    broken = Signal(kind=Kind.ENGINE, signal="the engine's counters (bad input)",
                    agreement=Agreement.ERROR, note="vllm:x_total fell from 9 to 3")
    failing = DEVICE.model_copy(update={"agreement": Agreement.DISAGREES})
    verdict = judge_chain([ENGINE, failing, broken])
    assert verdict.outcome is Outcome.ERROR and verdict.word == "ERROR"
    assert "fell from 9 to 3" in verdict.reason
    assert judge_chain([ENGINE, failing]).word == "FAIL"
    assert judge_chain([ENGINE]).word == "INCONCLUSIVE"


def test_the_chain_word_is_judged_not_read_back_from_its_reason():
    broken = Signal(kind=Kind.ENGINE, signal="the engine's counters (bad input)",
                    agreement=Agreement.ERROR, note="vllm:x_total fell from 9 to 3")
    verdict = judge_chain([ENGINE, broken])
    reworded = verdict.model_copy(update={"reason": "Inconclusive-looking words, reworded"})
    assert reworded.word == "ERROR" and reworded.outcome is Outcome.ERROR
    unsure = judge_chain([ENGINE]).model_copy(update={"reason": "ERROR-looking words"})
    assert unsure.word == "INCONCLUSIVE" and unsure.inconclusive


def test_the_ranks_each_engine_labels():
    from gates.proof import labelled_ranks

    assert labelled_ranks("lmcache", tp=8) == 8 and labelled_ranks("sglang", tp=4, dp=2) == 8
    assert labelled_ranks("vllm", tp=8, dp=2) == 2 and labelled_ranks("dynamo-kvbm", tp=8) == 1


def test_proof_inputs_carry_their_ranges():
    import pytest
    from pydantic import ValidationError

    for bad in ({"read_fraction_min": 0}, {"read_fraction_min": float("nan")},
                {"band": (150.0, 90.0)}, {"restore_bw": float("inf")}, {"expected_ranks": 0}):
        with pytest.raises(ValidationError):
            ProofContext(**bad)
    for bad in ({"kv_bytes_per_token": -1}, {"probe_seconds": float("nan")},
                {"process_read_bytes": -5}, {"expected_tokens": -1}):
        with pytest.raises(ValidationError):
            ProbeEvidence(**bad)
    with pytest.raises(ValidationError):
        StorageReads(device_bytes=float("inf"))


def test_an_engine_count_that_is_not_a_count_is_an_error_never_a_disagreement():
    # NaN or a negative delta is bad input from the engine: ERROR with the reason, not a FAIL.
    for bad in (float("nan"), -5.0):
        p = ProbeEvidence(engine="vllm", expected_tokens=1000, kv_bytes_per_token=8192,
                          storage_read_tokens=bad, gpu_hit_tokens=0.0, repetitions=1)
        chain = probe_chain(p, ProofContext())
        rows = [s for s in chain if s.agreement is Agreement.ERROR]
        assert rows and "not a count" in rows[0].note, [s.line() for s in chain]
        assert judge_chain(chain).outcome is Outcome.ERROR


def test_a_row_reads_as_one_line_with_its_value_expectation_and_notes():
    row = Signal(kind=Kind.ENGINE, signal="hits", value=8192, unit="tokens",
                 expected="≥ 7,373 tokens", agreement=Agreement.AGREES,
                 caveat="tier-blind", note="rank 0")
    assert row.line() == "hits = 8,192 tokens, expected ≥ 7,373 tokens: agrees (tier-blind; rank 0)"
    bare = Signal(kind=Kind.STORAGE, signal="block devices")
    assert bare.line() == "block devices = —, expected —: not exposed"


def test_a_bound_reads_a_count_within_it_without_a_note():
    from gates.proof.evidence import bounded

    assert bounded(None, 10, 100) == (Agreement.ABSENT, "")
    assert bounded(50, 10, 100) == (Agreement.AGREES, "")
    assert bounded(5, 10, 100) == (Agreement.DISAGREES, "")
    assert bounded(101, 10, 100) == (Agreement.INCONCLUSIVE, (
        "more than the probe could have read (100): the counter counts other requests or "
        "another unit, so it cannot show what this probe read"))


def test_within_includes_its_upper_bound():
    assert within(150, 90, 150) is Agreement.AGREES and within(90, 90, 150) is Agreement.AGREES


def test_the_chain_measurement_counts_disagreeing_signals_against_none_allowed():
    from gates.core.verdicts import Limit

    rank = ENGINE.model_copy(update={"signal": "rank 3", "agreement": Agreement.DISAGREES})
    failed = chain_measurement("proof", [ENGINE, DEVICE, rank])
    assert (failed.outcome, failed.value, failed.unit) == (Outcome.FAIL, 1, "signals")
    assert failed.limit == Limit.at_most(0, "signals")
    assert failed.note == judge_chain([ENGINE, DEVICE, rank]).reason
    passed = chain_measurement("proof", [ENGINE, DEVICE])
    assert (passed.outcome, passed.value) == (Outcome.PASS, 0)
    assert passed.note == judge_chain([ENGINE, DEVICE]).reason
    unsure = chain_measurement("proof", [ENGINE])
    assert unsure.limit == Limit.at_most(0, "signals") and unsure.unit == "signals"


def test_the_reports_evidence_table_has_one_row_per_signal():
    from gates.proof import evidence_table

    noted = DEVICE.model_copy(update={"caveat": "shared", "note": "nvme0n1"})
    table = evidence_table([noted, Signal(kind=Kind.CONTROL, signal="working set")])
    assert table.columns == ["signal", "kind", "value", "expected", "agrees?", "note"]
    assert table.rows == [
        ["block devices nvme0n1", "storage side", "1e+09 bytes", "90-150 % of the engine's",
         "agrees", "shared; nvme0n1"],
        ["working set", "control", "—", "—", "not exposed", ""]]


def _probe(**kw) -> ProbeEvidence:
    return ProbeEvidence(engine="vllm", kv_bytes_per_token=10, rank_mode="shard", **kw)


def test_two_probes_evidence_adds_up_figure_by_figure():
    from gates.proof import CacheDrop

    a = _probe(expected_tokens=100, probe_prompt_tokens=110, engine_prompt_tokens=120.0,
               storage_read_tokens=90.0, storage_read_bytes=900.0, gpu_hit_tokens=1.0,
               rank_reads={"tp_rank=0": 90.0, "tp_rank=1": 80.0},
               storage=StorageReads(device_bytes=1000, nic_bytes=2000, rdma_bytes=3000),
               process_read_bytes=500, probe_seconds=1.5, repetitions=1,
               page_cache=CacheDrop(files=1, bytes=64), storage_read_failures=1.0,
               cpu_hit_tokens=2.0, kv_dir_bytes=4000, devices_unwatched="tmpfs",
               error="e1", input_errors=["x", "y"], unclassified=["u"])
    b = _probe(expected_tokens=200, probe_prompt_tokens=210, engine_prompt_tokens=220.0,
               storage_read_tokens=190.0, storage_read_bytes=1900.0, gpu_hit_tokens=3.0,
               rank_reads={"tp_rank=1": 5.0, "tp_rank=2": 7.0},
               storage=StorageReads(device_bytes=10, nic_bytes=20, rdma_bytes=30),
               process_read_bytes=50, probe_seconds=2.25, repetitions=2,
               page_cache=CacheDrop(files=2, bytes=128), storage_read_failures=4.0,
               cpu_hit_tokens=5.0, kv_dir_bytes=3000, devices_unwatched="nfs",
               error="e2", input_errors=["y", "z"], unclassified=["u", "v"])
    both = a + b
    assert both.model_dump(exclude={"page_cache"}) == _probe(
        expected_tokens=300, probe_prompt_tokens=320, engine_prompt_tokens=340.0,
        storage_read_tokens=280.0, storage_read_bytes=2800.0, gpu_hit_tokens=4.0,
        rank_reads={"tp_rank=0": 90.0, "tp_rank=1": 85.0, "tp_rank=2": 7.0},
        storage=StorageReads(device_bytes=1010, nic_bytes=2020, rdma_bytes=3030),
        process_read_bytes=550, probe_seconds=3.75, repetitions=3, storage_read_failures=5.0,
        cpu_hit_tokens=7.0, kv_dir_bytes=4000, devices_unwatched="tmpfs; nfs",
        error="e1; e2", input_errors=["x", "y", "z"], unclassified=["u", "v"],
    ).model_dump(exclude={"page_cache"})
    assert (both.page_cache.files, both.page_cache.bytes, both.page_cache.probes) == (3, 192, 2)
    # The largest the KV files held, whichever probe saw it; the same words said once.
    assert (b + a).kv_dir_bytes == 4000 and (a + a).error == "e1"
    assert (a + _probe()).error == "e1" and (_probe() + b).devices_unwatched == "nfs"


def test_a_figure_one_probe_did_not_have_is_not_had_by_the_sum():
    full = _probe(probe_prompt_tokens=1, engine_prompt_tokens=1.0, storage_read_tokens=1.0,
                  storage_read_bytes=1.0, gpu_hit_tokens=1.0, process_read_bytes=1,
                  storage=StorageReads(device_bytes=1, nic_bytes=1, rdma_bytes=1),
                  storage_read_failures=1.0, cpu_hit_tokens=1.0, kv_dir_bytes=1)
    missing = ("probe_prompt_tokens", "engine_prompt_tokens", "storage_read_tokens",
               "storage_read_bytes", "gpu_hit_tokens", "process_read_bytes", "storage",
               "storage_read_failures", "cpu_hit_tokens", "kv_dir_bytes", "page_cache")
    for side in (full + _probe(), _probe() + full):
        assert {k: getattr(side, k) for k in missing} == dict.fromkeys(missing)
    partly = StorageReads(device_bytes=1)
    summed = (full + _probe(storage=partly)).storage
    assert (summed.device_bytes, summed.nic_bytes, summed.rdma_bytes) == (2, None, None)


def test_the_storage_side_is_held_against_each_known_reference():
    p = _probe(expected_tokens=100, storage_read_tokens=80.0, storage_read_bytes=900.0)
    assert p.storage_references() == [(900.0, "the engine's read bytes"),
                                      (1000, "the KV bytes the probe needed"),
                                      (800.0, "the engine's tokens x KV bytes per token")]
    for unknown in (float("nan"), float("inf"), 0.0, -1.0):
        q = p.model_copy(update={"storage_read_bytes": unknown, "storage_read_tokens": unknown})
        assert q.storage_references() == [(1000, "the KV bytes the probe needed")]
    # Any positive figure is one, however small (a fraction of a byte is still not zero).
    assert _probe(storage_read_bytes=0.5).storage_references() == [
        (0.5, "the engine's read bytes")]


def _row(name: str, agreement: Agreement, kind: Kind = Kind.ENGINE, **kw) -> Signal:
    return Signal(kind=kind, signal=name, agreement=agreement, **kw)


def test_an_error_chain_names_every_row_that_could_not_be_read():
    rows = [_row("a", Agreement.ERROR, note="unpaired"), _row("b", Agreement.ERROR, expected="≥ 1"),
            _row("c", Agreement.DISAGREES), ENGINE, DEVICE]
    verdict = judge_chain(rows)
    assert (verdict.word, verdict.reason) == ("ERROR", "ERROR: a: unpaired; b: ≥ 1")


def test_a_probe_that_could_not_examine_the_storage_says_so_and_names_each_disagreement():
    rows = [_row("cpu tier", Agreement.INCONCLUSIVE, Kind.CONTROL, voids_probe=True,
                 note="holds it all"),
            _row("tier2", Agreement.INCONCLUSIVE, Kind.CONTROL, voids_probe=True, expected="x"),
            _row("agreeing", Agreement.AGREES, Kind.CONTROL, voids_probe=True),
            _row("rank 1", Agreement.DISAGREES), _row("rank 2", Agreement.DISAGREES), DEVICE]
    verdict = judge_chain(rows)
    assert verdict.word == "INCONCLUSIVE" and verdict.reason == (
        "INCONCLUSIVE: cpu tier: holds it all; tier2: x; so rank 1 disagrees without judging "
        "the storage; so rank 2 disagrees without judging the storage")


def test_a_failed_chain_names_each_disagreeing_row_with_its_line():
    one, two = _row("rank 1", Agreement.DISAGREES), _row("rank 2", Agreement.DISAGREES, value=3)
    verdict = judge_chain([ENGINE, DEVICE, one, two])
    assert verdict.word == "FAIL" and verdict.reason == (
        f"rank 1 disagrees: {one.line()}; rank 2 disagrees: {two.line()}")


def test_an_undecided_chain_names_each_row_that_cannot_tell():
    rows = [ENGINE, DEVICE, _row("ws", Agreement.INCONCLUSIVE, Kind.CONTROL, note="fits"),
            _row("nic", Agreement.INCONCLUSIVE, Kind.STORAGE, expected="90-150 %")]
    verdict = judge_chain(rows)
    assert (verdict.word, verdict.reason) == ("INCONCLUSIVE",
                                              "INCONCLUSIVE: ws: fits; nic: 90-150 %")


def test_a_chain_without_an_agreeing_engine_counter_or_storage_side_is_undecided():
    alone = judge_chain([DEVICE, _row("absent", Agreement.ABSENT)])
    assert (alone.word, alone.reason) == ("INCONCLUSIVE", "INCONCLUSIVE: no engine counter of "
                                          "storage reads is exposed, or none moved")
    blind = judge_chain([ENGINE, _row("ctl", Agreement.AGREES, Kind.CONTROL)])
    assert (blind.word, blind.reason) == ("INCONCLUSIVE", (
        "INCONCLUSIVE: no storage-side signal agrees (name the array's block devices in "
        "[topology] devices, or its NICs in [topology] interfaces for NVMe-oF)"))


def test_caveated_engine_counters_are_each_named_and_one_without_a_caveat_suffices():
    a = ENGINE.model_copy(update={"signal": "a", "caveat": "tier-blind"})
    b = ENGINE.model_copy(update={"signal": "b", "caveat": "counted before"})
    verdict = judge_chain([a, b, DEVICE])
    assert (verdict.word, verdict.reason) == ("INCONCLUSIVE", (
        "INCONCLUSIVE: the engine's counters cannot tell storage from memory (a: tier-blind; "
        "b: counted before) and no control shows that memory could not have served the probe"))
    assert judge_chain([a, ENGINE, DEVICE]).word == "PASS"
    # A control that rules memory out counts only where it agrees.
    ruled = _row("drop", Agreement.ABSENT, Kind.CONTROL, rules_out_memory=True)
    assert judge_chain([a, b, DEVICE, ruled]).word == "INCONCLUSIVE"
    agreeing = ruled.model_copy(update={"agreement": Agreement.AGREES})
    assert judge_chain([a, b, DEVICE, agreeing]).word == "PASS"


def test_a_passing_chain_names_every_agreeing_row_in_order():
    rows = [ENGINE, _row("absent", Agreement.ABSENT), DEVICE,
            _row("ws", Agreement.AGREES, Kind.CONTROL)]
    verdict = judge_chain(rows)
    assert (verdict.word, verdict.reason) == ("PASS", (
        "the engine's counters and the storage side agree: "
        "vllm:external_prefix_cache_hits_total, block devices nvme0n1, ws"))
