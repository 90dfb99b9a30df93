"""G3's failures on speed end to end through `kvgate run`, on simulator arms over loopback: a
slow candidate, a candidate as fast as its baseline (A/A). The world (trusted G1 and G2
records, the targets' own disk) and the helpers are test_g2g3_e2e's; G3's failures of proof
are test_g3_e2e_proof_failures'. Files of their own so the simulator's end-to-end runs go to
different pytest-xdist workers (--dist loadfile keeps a file on one).
"""

from test_g2g3_e2e import BASELINE, QUICK, g2, on_disk, outcomes, run, site_text, world

__all__ = ["g2", "world"]  # the module fixtures, built again for this file


def test_g3_fails_on_a_slow_candidate(world, g2):
    # Half the baseline's read rate: every pair's TTFT about doubles, so the interval of three
    # pairs (QUICK) already lies far below the 25 % it must clear.
    done, record = run(world, "g3", site_text(on_disk(world, "t1"),
                                              ', "--read-limit", "0.5MB/s"'), thresholds=QUICK)
    assert done.returncode == 1
    assert outcomes(record)["TTFT p50 reduction @ concurrency 1"]["outcome"] == "FAIL"


def test_a_candidate_as_fast_as_its_baseline_fails_and_is_never_passed(world, g2):
    """A/A: the candidate arm is the baseline arm (the same read limit). Paired, interleaved,
    the drift of the machine hits both; the TTFT reduction's interval lies below 25 %."""
    same = f', "--read-limit", "{BASELINE}"'
    done, record = run(world, "g3", site_text(on_disk(world, "t1"), same))
    ms = outcomes(record)
    ttft = ms["TTFT p50 reduction @ concurrency 1"]
    assert done.returncode == 1, done.stdout[-3000:]
    assert ttft["outcome"] == "FAIL" and ttft["interval"][1] < 25, ttft
    assert record["verdict"] == "FAIL"
    looks = record["tables"]["Sequential looks @ concurrency 1"]
    assert looks["rows"][-1][2].endswith("→ FAIL"), looks
    assert "not independent draws" in record["facts"]["comparison design"]
