"""G3's failures of proof end to end through `kvgate run`, on simulator arms over loopback: the
GPU cache answering, corrupted chunks, KV written outside the arm's kv_dir. The world and the
helpers are test_g2g3_e2e's; the failures on speed are test_g3_e2e_failures'.
"""

from _edits import edited
from test_g2g3_e2e import QUICK, g2, on_disk, outcomes, passed_g1, run, site_text, trusted, world

__all__ = ["g2", "world"]  # the module fixtures, built again for this file


def test_g3_fails_when_the_gpu_cache_answered(world):
    site = site_text(on_disk(world, "t-none"), eviction="none")
    passed_g1(world / "none")
    trusted(world, "none", site)  # G2 at the same workload and eviction
    done, record = run(world, "g3", site, "none", thresholds=QUICK)
    assert done.returncode == 1, done.stdout[-3000:]
    proof = outcomes(record)["KV tokens read from the candidate storage @ concurrency 1"]
    assert proof["outcome"] == "FAIL"
    assert proof["note"].startswith("KV did not come from the candidate storage")


def test_g3_fails_when_chunks_are_corrupted(world, g2):
    corrupt = ', "--faults", \'{{"corrupt_fraction": 1.0}}\''
    done, record = run(world, "g3", site_text(on_disk(world, "t1"), corrupt), thresholds=QUICK)
    assert done.returncode == 1
    m = outcomes(record)["Outputs differing from recompute (first 8 tokens, concurrency 1)"]
    assert m["outcome"] == "FAIL" and "probe-ctx-" in m["note"]


def test_kv_written_outside_the_arms_kv_dir_fails_the_proof(world, g2):
    # Case 1b of issue #15: the launch command sends the KV elsewhere; kv_dir stays on target.
    elsewhere, t1 = on_disk(world, "elsewhere-kv"), on_disk(world, "t1")
    site = edited(site_text(t1), '"--kv-dir", "{kv_dir}"]\nkv_dir = "' + str(t1) + '/kv-candidate"',
                  f'"--kv-dir", "{elsewhere}"]\nkv_dir = "{t1}/kv-candidate"',
                  where="the e2e site")
    done, record = run(world, "g3", site, thresholds=QUICK)
    assert done.returncode == 1, done.stdout[-3000:]
    chain = outcomes(record)["Storage-read evidence chain @ concurrency 1"]
    assert chain["outcome"] == "FAIL" and "KV files in the arm's kv_dir" in chain["note"]
