"""G2/G3 rules on hand-made repetitions: stability, gains with intervals, proof, correctness."""

from gates.core.configuration import Decision, G2Limits, G3Limits
from gates.core.verdicts import Cause, Outcome
from gates.inference import Repetition, correctness, g2_measurements, g3_measurements
from gates.proof import StorageReads
from gates.proof.measurements import PROOF_FAILED, storage_proof


def evidence(reps):
    """Each repetition's probe evidence: what G3's storage measurements take."""
    return [r.evidence for r in reps]

def probed(r, **fields):
    """r with its probe's evidence changed; device_read_bytes is the devices' side."""
    storage = r.evidence.storage or StorageReads()
    if "device_read_bytes" in fields:
        storage = storage.model_copy(update={"device_bytes": fields.pop("device_read_bytes")})
    return r.model_copy(update={"evidence": r.evidence.model_copy(
        update={**fields, "storage": storage})})


def rep(arm, i, ttft, tput, c=8, errors=0, read=None, gpu=0.0, expected=1000, fit=True,
        outputs=None, logprobs=None):
    return Repetition(arm=arm, concurrency=c, repetition=i, ttfts=[ttft * f for f in
                                                                   (0.9, 1.0, 1.1)],
                      output_throughput=tput, sent=3, errors=errors,
                      storage_read_tokens=expected if read is None else read,
                      gpu_hit_tokens=gpu, expected_kv_tokens=expected, restore_gbps=1.5,
                      fit=fit, outputs=outputs or {}, logprobs=logprobs or {})


def by_name(measurements):
    return {m.name: m for m in measurements}


def test_a_stable_baseline_passes_g2():
    # CVs of 0.01 %: credibly under 5 % at the plan's first look (three repetitions).
    reps = [rep("baseline", i, 10.0 + 0.001 * i, 100.0 - 0.01 * i) for i in range(3)]
    ms = by_name(g2_measurements(reps, G2Limits()))
    assert ms["Baseline TTFT p50 @ concurrency 8"].value == 10.001
    cv = ms["Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.PASS and cv.interval[1] <= 5.0 and cv.interval_miss == 0.05
    assert cv.note.startswith("CV 0.0 % [0.0, 0.1] over 3 repetitions, each end at 0.83 % "
                              "(g2.cv_risk 5 % over looks at 3-8 repetitions)"), cv.note
    figures = {"Baseline TTFT p50 @ concurrency 8", "Baseline TTFT p99 @ concurrency 8",
               "Baseline output throughput @ concurrency 8"}
    # The absolute figures are reported (no limit holds them); every check passes.
    assert all(ms[n].outcome is Outcome.REPORTED and ms[n].limit is None for n in figures)
    assert all(m.outcome is Outcome.PASS for n, m in ms.items() if n not in figures)


def test_an_unstable_baseline_fails_g2_saying_so():
    # CV 20 % over three: the lower bound (9 %) is above 5 %, credibly unstable.
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate([8.0, 10.0, 12.0])]
    cv = by_name(g2_measurements(reps, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.FAIL and round(cv.value, 6) == 20.0 and cv.interval[0] > 5
    assert cv.note.startswith("baseline unstable: TTFT p50 CV credibly above 5 %; CV 20.0 % "
                              "[9.0, ∞] over 3 repetitions"), cv.note


def test_a_cv_at_the_limit_over_three_repetitions_does_not_pass():
    # Held as a point, CV 5.0 % <= 5 % passed; a true CV of 5 % gives that 63 % of the time.
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate([9.5, 10.0, 10.5])]
    cv = by_name(g2_measurements(reps, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.ERROR and cv.interval[0] < 5 < cv.interval[1]
    assert cv.note.startswith("INCONCLUSIVE: TTFT p50 CV neither credibly under nor over 5 % "
                              "after 3 of at most 8 repetitions (g2.repetitions_max); the level "
                              "ended before its budget"), cv.note


def test_an_undecided_cv_at_the_budget_is_inconclusive_naming_its_interval():
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate([9.5, 10.5] * 4)]
    cv = by_name(g2_measurements(reps, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.ERROR and cv.interval[0] < 5 < cv.interval[1]
    lo, hi = cv.interval
    assert cv.note.startswith(
        "INCONCLUSIVE: TTFT p50 CV neither credibly under nor over 5 % after 8 of at most 8 "
        f"repetitions (g2.repetitions_max); CV 5.3 % [{lo:.1f}, {hi:.1f}] over 8 "
        "repetitions"), cv.note


def test_fewer_repetitions_than_the_first_look_decide_nothing():
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate([5.0, 20.0])]
    cv = by_name(g2_measurements(reps, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.ERROR
    assert cv.note.startswith("INCONCLUSIVE: 2 repetitions, fewer than the plan's first look "
                              "(g2.repetitions 3)"), cv.note


def test_baseline_errors_fail_g2_and_an_unfit_generator_makes_it_inconclusive():
    reps = [rep("baseline", 0, 10, 100, errors=2), rep("baseline", 1, 10, 100, fit=False)]
    ms = by_name(g2_measurements(reps, G2Limits()))
    assert ms["Baseline request errors @ concurrency 8"].outcome is Outcome.FAIL
    # kvgate's own instrument lagging says nothing of the storage: never a FAIL, never a PASS.
    fit = ms["Load generator fit for a gate @ concurrency 8"]
    assert fit.outcome is Outcome.ERROR, fit
    assert fit.note.startswith("INCONCLUSIVE: the load generator was unfit in 1 of 2 "
                               "repetitions"), fit.note


def test_a_repetition_without_a_figure_is_an_error_not_a_median_of_the_rest():
    reps = [rep("baseline", i, 10.0, 100.0) for i in range(3)]
    reps[1] = reps[1].model_copy(update={"ttfts": [], "output_throughput": None})
    ms = by_name(g2_measurements(reps, G2Limits()))
    m = ms["Baseline TTFT p50 @ concurrency 8"]
    assert m.outcome is Outcome.ERROR and m.note == "1 of 3 repetitions have no successful request"


def test_one_repetition_cannot_give_a_cv():
    ms = by_name(g2_measurements([rep("baseline", 0, 10, 100)], G2Limits()))
    assert ms["Baseline throughput run-to-run CV @ concurrency 8"].outcome is Outcome.ERROR


PAIRS = 7  # the shipped plan's first look: the fewest pairs at which its sign test decides


def g3(cand, base=None, recompute=(), statistic="point"):
    """G3 on pairs: the i-th baseline repetition ran back to back with the i-th candidate's."""
    base = base or [rep("baseline", i, 10.0, 100.0 + i, c=x.concurrency)
                    for i, x in enumerate(cand)]
    pairs = {}
    for b, x in zip(base, cand, strict=True):
        pairs.setdefault(x.concurrency, []).append((b, x))
    return by_name(g3_measurements(pairs, list(recompute), G3Limits(),
                                   Decision(statistic=statistic)))


def test_a_clear_gain_passes_with_an_interval():
    ms = g3([rep("candidate", i, 6.0, 135.0 + i) for i in range(PAIRS)])
    ttft = ms["TTFT p50 reduction @ concurrency 8"]
    gain = ms["Output-throughput gain @ concurrency 8"]
    assert ttft.outcome is Outcome.PASS and round(ttft.value) == 40
    assert ttft.interval[0] <= ttft.value <= ttft.interval[1]
    assert gain.outcome is Outcome.PASS and "baseline's output throughput" in str(gain.limit)
    assert "7 ABBA pairs" in ttft.note
    assert "above the claimed band" not in gain.note


def test_a_gain_above_the_claimed_band_is_flagged():
    gain = g3([rep("candidate", i, 5.0, 200.0) for i in range(PAIRS)])[
        "Output-throughput gain @ concurrency 8"]
    assert gain.outcome is Outcome.PASS and "check that the baseline" in gain.note


def test_no_gain_fails():
    ms = g3([rep("candidate", i, 10.0, 100.0 + i) for i in range(PAIRS)])
    assert ms["TTFT p50 reduction @ concurrency 8"].outcome is Outcome.FAIL
    assert ms["Output-throughput gain @ concurrency 8"].outcome is Outcome.FAIL


def test_a_warm_gpu_cache_never_passes_as_storage():
    cand = [rep("candidate", i, 2.0, 300.0, read=0, gpu=1000) for i in range(PAIRS)]
    ms = g3(cand)
    read = ms["KV tokens read from the candidate storage @ concurrency 8"]
    gpu = ms["KV tokens served from the GPU cache during the probe @ concurrency 8"]
    assert read.outcome is Outcome.FAIL and read.note.startswith(PROOF_FAILED)
    assert gpu.outcome is Outcome.FAIL and gpu.value == 100


def test_set_aside_unfit_pairs_are_named_not_judged_and_a_still_unfit_level_is_inconclusive():
    cand = [rep("candidate", i, 6.0, 135.0 + i) for i in range(PAIRS)]
    base = [rep("baseline", i, 10.0, 100.0 + i) for i in range(PAIRS)]
    aside = [(rep("baseline", 2, 10.0, 100.0), rep("candidate", 2, 1.0, 900.0, fit=False)
              .model_copy(update={"unfit_reasons": ["event-loop lag p99 5.4 ms > 5.18 ms"]}))]
    pairs = {8: list(zip(base, cand, strict=True))}
    ms = by_name(g3_measurements(pairs, [], G3Limits(), Decision(), set_aside={8: aside}))
    fit = ms["Load generator fit for a gate @ concurrency 8"]
    assert fit.outcome is Outcome.PASS and fit.value == 0, fit
    assert "1 unfit pair set aside unjudged and measured again (event-loop lag p99 5.4 ms" \
        in fit.note, fit.note
    # The set-aside candidate's 1.0 s TTFT is in no figure: the gain is the kept pairs' 40 %.
    assert round(ms["TTFT p50 reduction @ concurrency 8"].value) == 40
    pairs[8][3] = (base[3], cand[3].model_copy(update={"fit": False}))
    ms = by_name(g3_measurements(pairs, [], G3Limits(), Decision(), set_aside={8: aside * 2}))
    fit = ms["Load generator fit for a gate @ concurrency 8"]
    # Both arms' kept repetitions are judged (issue #43 case 4): 1 of 14, the candidate's.
    assert fit.outcome is Outcome.ERROR and fit.note.startswith(
        "INCONCLUSIVE: the load generator was unfit in 1 of 14 repetitions (the control "
        "baseline's 0 of 7, the candidate's 1 of 7)"), fit.note
    assert "2 unfit pairs set aside" in fit.note


def test_kv_files_read_back_as_stored_pass_a_changed_one_fails_and_none_is_said():
    from gates.inference.kv_files import KvReadBack

    def read(**fields):
        return [rep("candidate", i, 6.0, 135.0 + i).model_copy(update={
            "kv_read_back": KvReadBack(**fields)}) for i in range(PAIRS)]

    name = "KV files read back as stored @ concurrency 8"
    m = g3(read(files=34, bytes=4 << 20))[name]
    assert m.outcome is Outcome.PASS and m.value == 0
    assert m.note.startswith("238 KV files (29.4 MB) over 7 repetitions hashed (SHA-256)"), m.note
    m = g3(read(files=34, bytes=1, changed=["c6/c69c.kv"], vanished=2))[name]
    assert m.outcome is Outcome.FAIL and m.value == 7
    assert m.note.startswith("7 of 238 KV files changed between store and restore (c6/c69c.kv)"
                             ": the storage gave back other bytes than it was given"), m.note
    assert "14 removed by the engine in between, not compared" in m.note
    assert g3(read(vanished=3))[name].outcome is Outcome.ERROR  # nothing left to compare
    mixed = read(files=1, bytes=1)
    mixed[0] = mixed[0].model_copy(update={"kv_read_back": None})
    assert g3(mixed)[name].outcome is Outcome.ERROR
    none = g3([rep("candidate", i, 6.0, 135.0 + i) for i in range(PAIRS)])[name]
    assert none.outcome is Outcome.NOT_APPLICABLE and "no KV directory" in none.note


def test_recompute_reference_speedups():
    rec = [rep("recompute", i, 149.5, 4.1) for i in range(PAIRS)]
    ms = g3([rep("candidate", i, 11.85, 74.9) for i in range(PAIRS)], recompute=rec)
    assert round(ms["TTFT speed-up vs recompute @ concurrency 8"].value, 1) == 12.6
    assert round(ms["Throughput speed-up vs recompute @ concurrency 8"].value, 1) == 18.3


def test_a_pair_without_a_figure_is_an_error_naming_it():
    cand = [rep("candidate", i, 7.0, 135.0, c=16) for i in range(PAIRS)]
    cand[1] = cand[1].model_copy(update={"ttfts": [], "output_throughput": None})
    ms = g3(cand)
    ttft = ms["TTFT p50 reduction @ concurrency 16"]
    # Named with why (#43): the pair, the arm and what it lacked, not the ratio's refusal of 0.
    assert ttft.outcome is Outcome.ERROR and ttft.note == "1 of 7 pairs have no figure"
    assert ttft.coverage.missing == ["#2 the candidate gave no TTFT p50: no successful request"]


def test_fewer_pairs_than_the_first_look_decide_nothing():
    ms = g3([rep("candidate", i, 6.0, 135.0) for i in range(PAIRS - 1)])
    ttft = ms["TTFT p50 reduction @ concurrency 8"]
    assert ttft.outcome is Outcome.ERROR and "first look is at 7 pairs" in ttft.note


def test_correctness_names_the_mismatching_context():
    good = rep("recompute", 0, 1, 1, outputs={"probe-ctx-0000": [1, 2, 3],
                                              "probe-ctx-0001": [4, 5, 6]})
    same = rep("candidate", 0, 1, 1, outputs={"probe-ctx-0000": [1, 2, 3],
                                              "probe-ctx-0001": [4, 5, 6]})
    bad = rep("candidate", 0, 1, 1, outputs={"probe-ctx-0000": [1, 2, 3],
                                             "probe-ctx-0001": [4, 9, 6]})
    assert correctness(same, good, 3).outcome is Outcome.PASS
    m = correctness(bad, good, 3)
    assert m.outcome is Outcome.FAIL and "probe-ctx-0001" in m.note and m.value == 1
    assert correctness(bad, good, 1).outcome is Outcome.PASS  # only the first token compared
    assert "first differs at output token 1: 9 vs 5" in m.note


def test_correctness_compares_logprobs_where_both_arms_sent_them():
    ids = {"probe-ctx-0000": [1, 2, 3]}
    ref = rep("recompute", 0, 1, 1, outputs=ids,
              logprobs={"probe-ctx-0000": [-7.5, -7.6, -7.4]})
    near = rep("candidate", 0, 1, 1, outputs=ids,
               logprobs={"probe-ctx-0000": [-7.5, -7.61, -7.4]})
    off = rep("candidate", 0, 1, 1, outputs=ids,
              logprobs={"probe-ctx-0000": [-7.5, -7.6, -9.9]})
    m = correctness(near, ref, 3, gap_max=0.1)
    assert m.outcome is Outcome.PASS and \
        "largest logprob gap 0.0100 over the first 3 tokens, up to a divergence" in m.note
    # Same greedy ids, but the third token's logprob moved by 2.5: not the KV that was stored.
    m = correctness(off, ref, 3, gap_max=0.1)
    assert m.outcome is Outcome.FAIL and m.value == 1
    assert "first differs at output token 2: 3 vs 3, logprob gap 2.5000" in m.note
    assert correctness(off, ref, 2, gap_max=0.1).outcome is Outcome.PASS


def test_correctness_without_token_ids_fails_and_says_so():
    ref = rep("recompute", 0, 1, 1, outputs={"probe-ctx-0000": [1, 2]})
    none = rep("candidate", 0, 1, 1, outputs={"probe-ctx-0000": []})
    m = correctness(none, ref, 2)
    assert m.outcome is Outcome.FAIL and "no output token ids" in m.note


def test_device_reads_prove_the_disk_was_read():
    from gates.core.verdicts import Limit
    from gates.proof.measurements import device_reads

    limit = Limit.at_least(90, "%")
    read = [probed(rep("candidate", 0, 1, 1), storage_read_bytes=1000.0,
                                                          device_read_bytes=1200)]
    cached = [probed(read[0], device_read_bytes=0)]
    unknown = [probed(read[0], device_read_bytes=None)]
    assert device_reads(8, evidence(read), limit).outcome is Outcome.PASS
    assert device_reads(8, evidence(cached), limit).outcome is Outcome.FAIL
    assert device_reads(8, evidence(unknown), limit).outcome is Outcome.NOT_APPLICABLE


def test_the_engine_process_must_have_read_what_its_restores_say():
    from gates.core.verdicts import Limit
    from gates.proof.measurements import process_reads, storage_proof

    limit = Limit.at_least(90, "%")
    read = [probed(rep("candidate", 0, 1, 1), storage_read_bytes=1000.0,
                                                          process_read_bytes=990)]
    cached = [probed(read[0], process_read_bytes=0)]
    assert process_reads(8, evidence(read), limit).outcome is Outcome.PASS
    m = process_reads(8, evidence(cached), limit)
    assert m.outcome is Outcome.FAIL and "page-cache hits do not count" in m.note
    none = [probed(read[0], storage_read_bytes=0.0)]
    assert process_reads(8, evidence(none), limit).outcome is Outcome.ERROR
    names = [x.name for x in storage_proof(8, evidence(cached), G3Limits())]
    assert "Engine process's storage reads vs its KV restores @ concurrency 8" in names
    fail = next(x for x in storage_proof(8, evidence(cached), G3Limits())
                if x.name.startswith("Engine"))
    assert fail.note.startswith(PROOF_FAILED)
    # without the process's reads: three measurements
    assert len(storage_proof(8, evidence([rep("candidate", 0, 1, 1)]), G3Limits())) == 3


def test_device_reads_are_a_band_and_other_io_above_it_is_named():
    from gates.core.verdicts import Limit
    from gates.proof.measurements import device_reads

    band = Limit(lo=90, hi=150, unit="%")
    # "Devices read 31,684,653,056 bytes, the engine 201,326,592": other traffic on the device.
    flooded = [probed(rep("candidate", 0, 1, 1),
        storage_read_bytes=201_326_592.0, device_read_bytes=31_684_653_056)]
    m = device_reads(8, evidence(flooded), band)
    assert m.outcome is Outcome.MARGINAL
    assert "other I/O on the KV devices during the probe: 31,483,326,464 bytes" in m.note
    fine = [probed(flooded[0], device_read_bytes=210_000_000)]
    assert device_reads(8, evidence(fine), band).outcome is Outcome.PASS


def test_g3_carries_an_evidence_chain_per_level():
    base = [rep("baseline", i, 2.0, 100) for i in range(3)]
    cand = [probed(rep("candidate", i, 1.0, 150),
        storage_read_bytes=1e6, device_read_bytes=1_000_000) for i in range(3)]
    out = g3_measurements({8: list(zip(base, cand, strict=True))}, [], G3Limits(), Decision())
    [chain] = [m for m in out if m.id == "g3.evidence_chain"]
    assert chain.at == 8 and chain.name == "Storage-read evidence chain @ concurrency 8"
    assert chain.outcome is Outcome.PASS, chain.note
    blind = [probed(r, caveat="tier-blind: counts CPU-tier hits too",
                                  device_read_bytes=None) for r in cand]
    [chain] = [m for m in g3_measurements({8: list(zip(base, blind, strict=True))}, [],
                                          G3Limits(), Decision())
               if m.id == "g3.evidence_chain"]
    assert chain.outcome is Outcome.ERROR and chain.note.startswith("INCONCLUSIVE")


def test_a_baseline_starved_of_cpu_says_so():
    # Case 8 of issue #15: a neighbour took the CPU, the baseline measured slow and passed.
    from gates.inference import starved
    from gates.loadgen import CpuUse

    busy = CpuUse(seconds=30, other_pct=61, engine_pct=35, own_pct=3, engine_wait_ms=9000)
    reps = [rep("baseline", 0, 2.0, 100), rep("baseline", 1, 2.6, 80).model_copy(
        update={"cpu": busy}), rep("baseline", 2, 2.0, 100)]
    [found] = starved(reps, G2Limits())
    text = found.text
    assert found.cause is Cause.BASELINE_STARVED and found.blocks
    assert text.startswith("baseline may be starved: during repetition 2 at concurrency 8")
    assert "other processes used 61 % of the CPU" in text and "run-queue waits 9,000 ms" in text
    unstable = {m.id: m for m in g2_measurements(reps, G2Limits())}["g2.ttft_p50_cv"]
    assert unstable.outcome is Outcome.FAIL and "other processes used 61 %" in unstable.note


def test_cpu_use_between_two_snapshots():
    from gates.loadgen import cpu_use
    from gates.loadgen.cpu import CpuSnapshot

    a = CpuSnapshot(wall=0.0, cores=2, host_busy=10.0, engine=2.0, own=1.0, engine_wait_ns=0)
    b = CpuSnapshot(wall=10.0, cores=2, host_busy=26.0, engine=7.0, own=2.0,
                    engine_wait_ns=3_000_000_000)
    use = cpu_use(a, b)
    # 20 core-seconds: the engine 5, kvgate 1, the other 10 are someone else's.
    assert (use.engine_pct, use.own_pct, use.other_pct) == (25.0, 5.0, 50.0)
    assert use.engine_wait_ms == 3000.0


def test_without_a_byte_counter_the_storage_side_is_held_against_the_kv_the_probes_needed():
    # vLLM counts tokens, not bytes: the devices and the process tree are compared with the
    # expected tokens x the KV bytes per token, as the evidence chain does.
    cand = [probed(rep("candidate", i, 1, 1, expected=4096),
        storage_read_bytes=None, device_read_bytes=4096 * 8192 + 2**20,
        process_read_bytes=4096 * 8192 + 4096) for i in range(2)]
    ms = by_name(storage_proof(1, evidence(cand), G3Limits(), kv_bytes_per_token=8192))
    disk = ms["KV devices' read bytes vs the engine's storage reads @ concurrency 1"]
    own = ms["Engine process's storage reads vs its KV restores @ concurrency 1"]
    assert disk.outcome is Outcome.PASS and round(disk.value, 1) == 103.1, disk
    assert "the KV bytes the probe needed 67,108,864" in disk.note
    assert own.outcome is Outcome.PASS and round(own.value, 2) == 100.01, own
    unknown = by_name(storage_proof(1, evidence(cand), G3Limits()))
    assert unknown["KV devices' read bytes vs the engine's storage reads @ concurrency 1"] \
        .outcome is Outcome.ERROR


UNSTABLE = [8.0, 10.0, 12.0]  # TTFT p50s: CV 20 %, credibly above 5 % over three


def _with_machine(reps, speeds):
    from gates.inference.machine import CpuReference
    return [r.model_copy(update={"machine": [CpuReference(seconds={0: a}),
                                             CpuReference(seconds={0: b})]})
            for r, (a, b) in zip(reps, speeds, strict=True)]


def test_an_unstable_baseline_on_a_moving_machine_is_inconclusive_not_fail():
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate(UNSTABLE)]
    moving = _with_machine(reps, [(0.010, 0.010), (0.010, 0.012), (0.012, 0.0125)])
    cv = by_name(g2_measurements(moving, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.ERROR
    # Four readings (the shared ones once), speeds 100, 100, 83, 80: CV 12 %, credibly > 5 %.
    assert cv.note.startswith("INCONCLUSIVE: TTFT p50 CV credibly above 5 %, but the "
                              "machine's CPU speed moved (CV 11.7 % [7.3, 35.2] over 4 readings, "
                              "credibly above g2.cpu_speed_steady_cv 5 %)"), cv.note


def test_an_unstable_baseline_on_a_steady_machine_still_fails():
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate(UNSTABLE)]
    steady = _with_machine(reps, [(0.010, 0.0101), (0.0101, 0.0102), (0.0102, 0.0101)])
    cv = by_name(g2_measurements(steady, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.FAIL
    assert "the machine's CPU speed: CV 0.8 % [0.5, 2.4] over 4 readings" in cv.note, cv.note


def test_a_machine_not_shown_steady_leaves_a_failure_inconclusive():
    # Speeds 3 % apart: neither credibly above 5 % nor credibly under it with four readings.
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate(UNSTABLE)]
    unsure = _with_machine(reps, [(0.010, 0.0103), (0.0103, 0.0100), (0.0100, 0.0097)])
    cv = by_name(g2_measurements(unsure, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.ERROR
    assert cv.note.startswith("INCONCLUSIVE: TTFT p50 CV credibly above 5 %, but the "
                              "machine's CPU speed was not shown steady (CV 2.5 %"), cv.note
    assert "its upper bound above g2.cpu_speed_steady_cv 5 %" in cv.note


def _with_device(reps, speeds):
    from gates.inference.machine import DeviceReference
    return [r.model_copy(update={"device": [DeviceReference(bytes_per_s=a),
                                            DeviceReference(bytes_per_s=b)]})
            for r, (a, b) in zip(reps, speeds, strict=True)]


def test_an_unstable_baseline_on_a_moving_kv_device_is_inconclusive_not_fail():
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate(UNSTABLE)]
    steady_cpu = _with_machine(reps, [(0.010, 0.0101), (0.0101, 0.0102), (0.0102, 0.0101)])
    moving = _with_device(steady_cpu, [(100e6, 100e6), (100e6, 60e6), (60e6, 70e6)])
    cv = by_name(g2_measurements(moving, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.ERROR
    assert cv.note.startswith("INCONCLUSIVE: TTFT p50 CV credibly above 5 %, but the KV "
                              "device's read speed moved (CV 25.0 % [15.2, 82.6] over 4 "
                              "readings"), cv.note
    assert "credibly above g2.device_speed_steady_cv 10 %" in cv.note
    assert "the machine's CPU speed: CV 0.8 %" in cv.note


def test_an_unstable_baseline_on_a_steady_kv_device_still_fails_and_names_both_controls():
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate(UNSTABLE)]
    steady = _with_device(_with_machine(reps, [(0.010, 0.0101), (0.0101, 0.0102),
                                                (0.0102, 0.0101)]),
                          [(100e6, 101e6), (101e6, 102e6), (102e6, 100e6)])
    cv = by_name(g2_measurements(steady, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.FAIL
    assert "the KV device's read speed: CV 1.0 % [0.6, 2.8] over 4 readings" in cv.note, cv.note
    assert "the machine's CPU speed: CV 0.8 %" in cv.note


def test_a_device_reading_that_failed_moves_nothing():
    from gates.inference.machine import DeviceReference
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate(UNSTABLE)]
    failed = [r.model_copy(update={"device": [DeviceReference(bytes_per_s=100e6),
                                              DeviceReference(error="fio exited 1")]})
              for r in reps]
    cv = by_name(g2_measurements(failed, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    # The failed readings are not speeds of 0 (an infinite variation): only the good ones count.
    assert cv.outcome is Outcome.FAIL
    assert "the KV device's read speed: CV 0.0 % [0.0, 0.0] over 3 readings" in cv.note


def test_a_device_reference_that_could_not_be_read_is_said():
    from gates.inference.machine import DeviceReference
    reps = [rep("baseline", i, t, 100.0) for i, t in enumerate(UNSTABLE)]
    unread = [r.model_copy(update={"device": [DeviceReference(
        error="the KV device reference could not read: Invalid argument")]}) for r in reps]
    cv = by_name(g2_measurements(unread, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.FAIL
    assert "the KV device reference could not read: Invalid argument" in cv.note


def test_a_stable_baseline_on_a_moving_machine_passes_and_says_how_much_it_moved():
    reps = [rep("baseline", i, 10.0, 100.0) for i in range(3)]
    moving = _with_machine(reps, [(0.010, 0.010), (0.010, 0.013), (0.013, 0.012)])
    cv = by_name(g2_measurements(moving, G2Limits()))[
        "Baseline TTFT p50 run-to-run CV @ concurrency 8"]
    assert cv.outcome is Outcome.PASS
    assert "the machine's CPU speed: CV 13.1 % [8.1, 39.4] over 4 readings" in cv.note, cv.note


def test_a_repetition_stored_before_its_evidence_was_one_type_still_loads():
    # G2 evidence files written by an earlier kvgate hold the proof's figures as flat fields.
    old = {"arm": "candidate", "concurrency": 8, "repetition": 0, "ttfts": [1.0],
           "output_throughput": 10.0, "sent": 1, "errors": 0, "storage_read_tokens": 512.0,
           "expected_kv_tokens": 512, "device_read_bytes": 4096, "metrics_error": "x",
           "kv_dir": "/t/kv", "kv_dir_bytes": 8192, "page_cache": "posix_fadvise(DONTNEED)"}
    r = Repetition.model_validate(old)
    e = r.evidence
    assert (e.storage_read_tokens, e.expected_tokens, e.storage.device_bytes) == (512.0, 512, 4096)
    assert (e.error, e.kv_dir, e.kv_dir_bytes, e.engine) == ("x", "/t/kv", 8192, "candidate")
    assert e.repetitions == 1 and "storage_read_tokens" in old
    # Its drop was described, never measured (#43): kept, and not believed.
    assert e.page_cache.how == "posix_fadvise(DONTNEED)" and not e.page_cache.verified
    assert Repetition.model_validate_json(r.model_dump_json()) == r


def _diverging(at: int, gap: float, earlier_gap: float = 0.0, tokens: int = 16):
    """A recompute and a candidate output that agree up to token ``at``, then differ there:
    the chosen tokens' logprobs ``gap`` apart (earlier tokens ``earlier_gap``), and so are
    recompute's own top-1 (its choice) and top-2 (the candidate's), as a near-tie's are (#43:
    measured from one distribution). Three more contexts agree: one tie of four is within
    the shipped bound (25 %)."""
    ids = list(range(100, 100 + tokens))
    lps = [-7.0 - 0.01 * i for i in range(tokens)]
    flipped = ids[:at] + [9999] + [ids[i] + 1 for i in range(at + 1, tokens)]
    moved = [x + earlier_gap for x in lps[:at]] + [lps[at] + gap] + lps[at + 1:]
    top = [[(i, x), (i + 5000, x - 1.0)] for i, x in zip(ids, lps, strict=True)]
    top[at] = [(ids[at], lps[at]), (9999, lps[at] - abs(gap))]
    same = {f"probe-ctx-000{k}": [1000 * k + i for i in range(tokens)] for k in range(3)}
    ref = rep("recompute", 0, 1, 1, outputs={"probe-ctx-0009": ids, **same},
              logprobs={"probe-ctx-0009": lps}).model_copy(
        update={"top_logprobs": {"probe-ctx-0009": top}})
    cand = rep("candidate", 0, 1, 1, outputs={"probe-ctx-0009": flipped, **same},
               logprobs={"probe-ctx-0009": moved})
    return cand, ref


def test_a_greedy_flip_at_a_near_tie_is_numerics_not_a_mismatch():
    """#29: vLLM's CPU build, the README's block at 16 contexts: probe-ctx-0009 first differed
    at output token 14 with a logprob gap of 0.0000 (and two more at 0.0078): a near-tie."""
    for at, gap in ((14, 0.0), (8, 0.0078), (9, -0.0078)):
        cand, ref = _diverging(at, gap)
        m = correctness(cand, ref, 16, gap_max=0.1, tie_max=0.02, tie_share_max=25.0)
        assert m.outcome is Outcome.PASS and m.value == 0, m.note
        assert "1 diverged at a near-tie, numerics and not a mismatch" in m.note
        assert f"first differs at output token {at}: 9999 vs {100 + at}" in m.note
        assert f"recompute's top-1 and top-2 {abs(gap):.4f} nats apart (<= 0.02)" in m.note
        assert "greedy argmax flips" in m.note  # the rule, said where it is used


def test_a_real_gap_an_earlier_drift_or_the_first_token_still_fail():
    cases = {"a real gap at the flip": _diverging(14, 0.5),
             "logprobs that drifted before the flip": _diverging(14, 0.0, earlier_gap=0.3),
             "the first token": _diverging(0, 0.0)}
    for why, (cand, ref) in cases.items():
        m = correctness(cand, ref, 16, gap_max=0.1, tie_max=0.02, tie_share_max=25.0)
        assert m.outcome is Outcome.FAIL and m.value == 1, why
        assert "the restored KV is not the KV that was stored" in m.note, why
    # Without the engine's logprobs, or its top-k, nothing tells a tie from corruption.
    cand, ref = _diverging(14, 0.0)
    cand.logprobs.clear()
    assert correctness(cand, ref, 16, 0.1, 0.02, 25.0).outcome is Outcome.FAIL
    cand, ref = _diverging(14, 0.0)
    ref.top_logprobs.clear()
    assert correctness(cand, ref, 16, 0.1, 0.02, 25.0).outcome is Outcome.FAIL
    # And without the tolerances configured, every divergence counts, as before.
    cand, ref = _diverging(14, 0.0)
    assert correctness(cand, ref, 16, gap_max=0.1).outcome is Outcome.FAIL
    assert correctness(cand, ref, 16, gap_max=0.1, tie_max=0.02).outcome is Outcome.FAIL
