"""gates.inference.sweep: one working set's pairs summarised; where the gain and the proof start."""

import pytest
from test_g2g3 import probed, rep

from gates.core.configuration import Decision, G3Limits
from gates.inference import break_even, proof_from, sweep_point
from gates.inference.sweep import SweepPoint, sweep_plan
from gates.proof import ProofContext

LIMITS, DECISION = G3Limits(), Decision()
PROOF = ProofContext(read_fraction_min=LIMITS.storage_read_fraction_min,
                     band=(LIMITS.storage_side_band_min, LIMITS.storage_side_band_max))


def pairs(ttft_ratio, tput_ratio, n=3, **cand):
    """n pairs; each candidate's restores read 1,000 B, which its devices read too."""
    return [(rep("baseline", i, 10.0, 100.0 + i),
             probed(rep("candidate", i, 10.0 * ttft_ratio * (1 + 0.01 * i),
                        (100.0 + i) * tput_ratio, **cand), storage_read_bytes=1000.0,
                    device_read_bytes=1100)) for i in range(n)]


def point(ps, size=1000):
    return sweep_point(size, 9, size, 8, ps, LIMITS, DECISION, PROOF, None, 12.0)


def test_few_pairs_give_the_widest_interval_and_say_its_level():
    p = point(pairs(0.5, 1.6))
    r, g = p.ttft_reduction, p.throughput_gain
    # 3 pairs: [d_(1), d_(3)] holds the median with probability 1 - 2 x 0.5^3
    assert r.level == pytest.approx(0.75) and g.level == pytest.approx(0.75)
    assert r.lo < r.point < r.hi and r.point == pytest.approx(50 - 0.5, abs=0.6)
    assert g.point == pytest.approx(60.0) and r.clears and g.clears
    assert (r.limit, g.limit) == (25.0, 29.0)


def test_enough_pairs_take_g3s_confidence_not_a_wider_one():
    assert sweep_plan(3, DECISION).level(3) == pytest.approx(0.75)
    assert sweep_plan(12, DECISION).level(12) >= DECISION.confidence
    assert sweep_plan(12, DECISION).rank(12) > 1


def test_a_gain_below_the_limit_does_not_clear():
    p = point(pairs(0.9, 1.1))
    assert not p.ttft_reduction.clears and not p.throughput_gain.clears and not p.clears


def test_a_warm_gpu_cache_is_no_storage_proof():
    warm = point(pairs(0.2, 3.0, read=0, gpu=1000))
    read = point(pairs(0.2, 3.0))
    assert warm.ttft_reduction.clears and not warm.proven and warm.proof == "FAIL"
    assert read.proven, read.proof_note


def test_the_proof_word_is_the_chains_own_not_its_notes_first_word():
    # the engine read the KV, no storage-side signal says so: INCONCLUSIVE, an ERROR outcome
    unwatched = [(b, probed(c, device_read_bytes=None)) for b, c in pairs(0.2, 3.0)]
    cpu = point(unwatched)
    assert cpu.proof == "ERROR" and cpu.proof_word == "INCONCLUSIVE", cpu.proof_note
    reworded = cpu.model_copy(update={"proof_note": "ERROR-looking words, reworded"})
    assert reworded.proof_word == "INCONCLUSIVE"
    stored = SweepPoint.model_validate_json(reworded.model_dump_json())
    assert stored.proof_word == "INCONCLUSIVE"


def test_failed_requests_leave_the_point_without_figures():
    p = point(pairs(0.5, 1.6, errors=1))
    assert p.error.startswith("3 failed requests") and p.ttft_reduction is None
    assert not p.clears and not p.proven


def test_a_repetition_without_a_figure_is_a_value_error():
    ps = pairs(0.5, 1.6)
    ps[0] = (ps[0][0], ps[0][1].model_copy(update={"ttfts": []}))
    with pytest.raises(ValueError):
        point(ps)


def figures(clears, proven, size):
    band = {"point": 50.0, "lo": 40.0, "hi": 60.0, "level": 0.75, "limit": 25.0,
            "clears": clears}
    return SweepPoint(asked=0, contexts=9, working_set=size, concurrency=8,
                      ttft_reduction=band, throughput_gain=band,
                      proof="PASS" if proven else "ERROR")


def test_break_even_is_where_every_larger_point_clears():
    ps = [figures(False, True, 1), figures(True, True, 2), figures(False, True, 3),
          figures(True, True, 4), figures(True, True, 5)]
    assert break_even(ps).working_set == 4
    assert break_even(ps[:3]) is None and break_even([]) is None


def test_the_proof_holds_from_the_first_size_every_larger_one_proves():
    ps = [figures(True, False, 1), figures(True, True, 2), figures(True, True, 3)]
    assert proof_from(ps).working_set == 2
    assert proof_from(ps[:1]) is None


def test_a_point_that_could_not_be_measured_ends_the_claim_from_here_up():
    """"From 4 up every size clears" cannot stand on a size 6 nobody measured: it counts as
    one that did not clear (before: it was left out, and 4 was the break-even)."""
    failed = SweepPoint(asked=0, contexts=9, working_set=6, concurrency=8, error="unfit")
    ps = [figures(False, False, 1), figures(True, True, 4), failed]
    assert break_even(ps) is None and proof_from(ps) is None
    # Above the last size that could not be measured the claim stands again.
    above = [*ps, figures(True, True, 8), figures(True, True, 9)]
    assert break_even(above).working_set == 8 and proof_from(above).working_set == 8
