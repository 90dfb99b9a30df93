"""G3 on storage that fails (issue #44): `kvgate run g3` for real — launched simulator arms over
loopback, the load generator, the proof, correctness, the read-back — with the target, and so
both arms' KV directories, on the fault filesystem (tests/faultfs/); the faults are set on the
candidate's chunk files only. The e2e site and helpers are test_g2g3_e2e's.

A kv_dir on FUSE is on no local block device, and FUSE's reads never reach the engine's
/proc/PID/io read_bytes: the chain's block-device row is INCONCLUSIVE, g3.device_reads ERROR and
the process-reads row FAILs whatever the fault, so G3 on this mount is never PASS. Each test
therefore asserts the signal that catches ITS fault, and the signals that held (what the fault
did not touch): together they are each other's control.

Signals, by fault (the README's table):
- EIO on a share of the engine's chunk reads: the engine recomputes from the first chunk it
  could not read, so the proof's storage-read tokens fall far below 100 % (FAIL); correctness
  holds (recomputed KV is correct KV).
- bytes flipped on half the reads: correctness FAILs (outputs differ from recompute) and the
  read-back FAILs (the files' hashes differ between store and restore).
- a stall on the engine's restores: the TTFT reduction and the throughput gain FAIL (the
  candidate is slower than its baseline); the KV still came from storage; nothing crashes.
- every store fails (LMCache/LMCache#4386, #4364: health 200, the engine serving by recompute):
  the proof's storage-read tokens are 0 (FAIL) and no KV file is left to read back (ERROR),
  whatever the gain says.
"""

from __future__ import annotations

import errno

import pytest
from _edits import edited, small_thresholds
from faultfs import Fault
from faultfs.fixture import faultfs  # noqa: F401  (the fixture)
from test_g2g3_e2e import QUICK, outcomes, passed_g1, run, site_text, trusted

CHUNKS = "/target/kv-candidate/*.kv"  # the candidate's chunk files (gates/sim/tier.py)
ENGINE = "* -m gates.sim *"  # the simulator's command line: the engine, not kvgate or fio
PROOF = "KV tokens read from the candidate storage @ concurrency 1"
OUTPUTS = "Outputs differing from recompute (first 8 tokens, concurrency 1)"
READ_BACK = "KV files read back as stored @ concurrency 1"
TTFT = "TTFT p50 reduction @ concurrency 1"
GAIN = "Output-throughput gain @ concurrency 1"
DEVICES = "KV devices' read bytes vs the engine's storage reads @ concurrency 1"


@pytest.fixture
def world(tmp_path, repo):
    """An output folder with a passing G1 record, and G3 decided from three pairs (QUICK) with
    no KV device reference between repetitions (test_g2g3_e2e's world, without its disk)."""
    (tmp_path / QUICK).write_text(edited(small_thresholds(repo, [3]),
                                         'device_reference = "0.5s"', 'device_reference = "0s"',
                                         where="thresholds.toml"))
    (tmp_path / "thresholds.toml").write_text(small_thresholds(repo, [3]))
    passed_g1(tmp_path / "out")
    return tmp_path


def g3_on(world, faultfs, fault: Fault):  # noqa: F811
    """`kvgate run g3` with the target on the fault filesystem and ``fault`` in force from the
    start; the G2 record it stands on is the site's baseline as the simulator models it."""
    site = site_text(faultfs.mountpoint / "target")
    trusted(world, "out", site)
    faultfs.set(fault)
    done, record = run(world, "g3", site, thresholds=QUICK)
    assert record is not None, done.stdout[-3000:] + done.stderr[-3000:]
    ms = outcomes(record)
    # Whatever the fault: on FUSE no block device can be watched, so G3 cannot PASS.
    assert ms[DEVICES]["outcome"] == "ERROR" and "fuse" in ms[DEVICES]["note"], ms[DEVICES]
    assert record["verdict"] != "PASS" and done.returncode != 0
    [rule] = faultfs.stats()["faults"]
    assert rule["fired"] > 0, rule  # the fault was met, not just set
    return record, ms


def engine_log(world) -> str:
    """The candidate engine's logs, every repetition's (the arm's log is evidence)."""
    return "\n".join(p.read_text(errors="replace")
                     for p in sorted(world.glob("out/*/evidence/g3-arm-candidate-*.log")))


def test_eio_on_a_share_of_restores_is_caught_by_the_storage_read_proof(world, faultfs):  # noqa: F811
    """30 % of the engine's chunk reads fail with EIO: it recomputes from the first chunk it
    could not read (gates/sim/engine.py), so the proof's storage-read tokens fall far below
    the expected (at most ~1/2 even if every context's first failure came late; ~15 % on
    average), a FAIL; the outputs still match recompute's."""
    record, ms = g3_on(world, faultfs, Fault("error", op="read", errno=errno.EIO, path=CHUNKS,
                                             process=ENGINE, share=0.3, seed=1))
    proof = ms[PROOF]
    assert proof["outcome"] == "FAIL" and proof["value"] < 50, proof
    assert ms[OUTPUTS]["outcome"] == "PASS", ms[OUTPUTS]
    assert ms[READ_BACK]["outcome"] == "PASS", ms[READ_BACK]  # kvgate's own reads were spared
    assert "KV chunk read failed" in engine_log(world) and "Input/output error" in \
        engine_log(world)


def test_flipped_bytes_on_read_fail_correctness_and_the_read_back(world, faultfs):  # noqa: F811
    """Half the reads of the candidate's chunk files return their first 64 bytes inverted, to
    the engine and to kvgate alike: the restored KV is not the stored KV, so the outputs differ
    from recompute's (FAIL), and the files' hashes differ between the hash taken before the
    probe and the read-back after it (FAIL)."""
    record, ms = g3_on(world, faultfs, Fault("flip", path=CHUNKS, start=0, end=64, share=0.5,
                                             seed=3))
    outputs, back = ms[OUTPUTS], ms[READ_BACK]
    assert outputs["outcome"] == "FAIL" and "probe-ctx-" in outputs["note"], outputs
    assert back["outcome"] == "FAIL" and back["value"] > 0, back
    assert "the storage gave back other bytes than it was given" in back["note"], back["note"]
    assert record["verdict"] == "FAIL"


def test_a_stall_on_the_restores_fails_the_gains_without_a_crash(world, faultfs):  # noqa: F811
    """Every chunk read of the engine stalls 0.25 s: a context's 16 chunks on 4 readers take
    ~1 s where the baseline's 1 MB/s takes ~0.26 s, so the candidate is far slower than its
    baseline and both gains FAIL below zero; the KV still came from storage and was right."""
    record, ms = g3_on(world, faultfs, Fault("delay", op="read", path=CHUNKS, process=ENGINE,
                                             delay=0.25))
    for name in (TTFT, GAIN):
        assert ms[name]["outcome"] == "FAIL" and ms[name]["value"] < 0, ms[name]
    assert ms[PROOF]["outcome"] == "PASS" and ms[PROOF]["value"] == 100, ms[PROOF]
    assert ms[OUTPUTS]["outcome"] == "PASS", ms[OUTPUTS]
    assert record["verdict"] == "FAIL"


def test_a_tier_whose_every_store_fails_never_passes(world, faultfs):  # noqa: F811
    """LMCache/LMCache#4386 and #4364: every KV store fails while the engine answers /health
    200 and serves by recomputing. Its gains may look fine (recompute at 2 000 tokens/s beats a
    1 MB/s baseline), but the proof sees no token read from storage (FAIL) and no KV file is
    left to read back (ERROR)."""
    record, ms = g3_on(world, faultfs, Fault("error", op="write", errno=errno.EIO,
                                             path="/target/kv-candidate/*.kv.tmp*"))
    proof = ms[PROOF]
    assert proof["outcome"] == "FAIL" and proof["value"] == 0, proof
    assert proof["note"].startswith("KV did not come from the candidate storage"), proof
    back = ms[READ_BACK]
    assert back["outcome"] == "ERROR" and "no KV file was left to read back" in back["note"], back
    assert ms[OUTPUTS]["outcome"] == "PASS", ms[OUTPUTS]  # recomputed KV is right
    log = engine_log(world)
    assert "KV chunk write failed" in log and "the chunk is not stored" in log, log[-2000:]
