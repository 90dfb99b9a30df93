"""Issue #43 case 5 end to end through `kvgate run`: a crippled baseline no longer reads as a
great array. The world (trusted G1 and G2 records, the targets' own disk) and the helpers are
test_g2g3_e2e's; a file of its own so its simulator run goes to its own pytest-xdist worker.

The e2e site's baseline is the simulator throttled to 1 MB/s in the engine (--read-limit), its
KV directory on the same disk as the candidate's: the storage is as fast for both arms, the
baseline is not. Before the fix G3 PASSed the candidate's gain with a note on the measurement
alone; now G3 reads both arms' storage with the same KV-restore job, and the gain beyond what
the two bandwidths allow is a blocking deviation in the record.
"""

from pathlib import Path

from test_g2g3_e2e import QUICK, g2, on_disk, outcomes, run, site_text, world

from gates.core.verdicts import Cause, Deviation

__all__ = ["g2", "world"]  # the module fixtures, built again for this file

GAIN = "Output-throughput gain @ concurrency 1"


def test_a_baseline_throttled_in_its_engine_is_a_blocking_deviation_not_a_clean_pass(world, g2):
    target = on_disk(world, "t1")
    done, record = run(world, "g3", site_text(target), thresholds=QUICK)
    assert record is not None, done.stdout[-3000:]
    # What the arms' storage read: both KV directories, on the same disk, with the same job.
    said = record["facts"]["arms' storage"]
    assert "baseline " in said and f"in {target}/kv-baseline" in said, said
    assert "candidate " in said and f"in {target}/kv-candidate" in said, said
    assert "the most throughput gain it explains: " in said, said
    assert any(p.startswith("evidence/fio-g3-storage-baseline-") for p in record["evidence"]), \
        sorted(record["evidence"])
    for arm in ("baseline", "candidate"):  # the reading's file went with its folder
        assert not (Path(target) / f"kv-{arm}" / "kvgate-arm-storage").exists()
    gain = outcomes(record)[GAIN]
    assert gain["value"] > 40, gain  # above the claimed band: what the storage cannot explain
    [text] = [d.text for d in map(Deviation.model_validate, record["deviations"])
              if d.cause is Cause.GAIN_BEYOND_STORAGE]
    assert text.startswith("gain beyond the arms' storage at concurrency 1: output throughput "
                           f"{gain['value']:+.0f} %"), text
    assert "the KV model allows at most from the arms' measured storage" in text, text
