"""The pure G1 rules on recorded fio reports (tests/data/fio/); then the other-I/O deviation
of a real G1 run while another process writes to the target's device."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gates.core.configuration import Ceilings, G1Limits
from gates.core.quantities import bandwidth_unit
from gates.core.verdicts import Cause, Outcome
from gates.storage import StepOutcome, parse_fio_json, watched_device
from gates.storage import g1 as _g1
from gates.storage.fio import FioReport, percentile_from_bins

DATA = Path(__file__).parent / "data" / "fio"
SEQREAD_BW = 1518897010  # B/s in seqread_1m.json
SEQWRITE_BW = 4573319988
KV_BW = 344595682 + 355280990 + 343025174 + 339229779
QD32_IOPS = 88469.53047


def report(name: str, rename: dict[str, str] | None = None) -> FioReport:
    """A recorded report, with jobs renamed to the names the G1 job set uses."""
    document = json.loads((DATA / name).read_text())
    for entry in document.get("jobs", []) + document.get("client_stats", []):
        entry["jobname"] = (rename or {}).get(entry["jobname"], entry["jobname"])
    return parse_fio_json(json.dumps(document))


def step(name: str, rename: dict[str, str] | None = None) -> StepOutcome:
    return StepOutcome(report=report(name, rename), evidence=[f"evidence/{name}"])


def limits(**kw) -> G1Limits:
    values = {"seq_read_bw_min": "1.5 GB/s", "seq_write_bw_min": "4 GB/s",
              "kv_restore_bw_min": "1 GB/s", "randread_4k_qd1_p99_max": "1ms",
              "randread_4k_iops_min": 80000, **kw}
    return G1Limits(**values)


NO_CEILINGS = Ceilings()


QD1 = {"randread-4k-qd1": "randread-qd1"}


def qd1_p99_ns() -> float:
    bins = report("randread_4k_qd1.json").jobs[0].read.clat_ns.bins
    return percentile_from_bins(bins, 99)


# ---- bandwidth --------------------------------------------------------------------------

@pytest.mark.parametrize(("floor", "outcome"), [
    ("1.5 GB/s", Outcome.PASS), ("1.518 GB/s", Outcome.PASS), ("1.519 GB/s", Outcome.FAIL),
    ("2 GB/s", Outcome.FAIL)])
def test_seqread_bandwidth_around_the_limit(floor, outcome):
    m = _g1.bandwidth("seqread", step("seqread_1m.json"), limits(seq_read_bw_min=floor),
                      NO_CEILINGS)
    assert m.outcome is outcome
    assert m.value == pytest.approx(SEQREAD_BW / 1e9)
    assert m.unit == "GB/s"
    assert m.limit.lo == pytest.approx(float(floor.split()[0]))
    assert m.limit.key == "g1.seq_read_bw_min"
    # the coverage line leads the evidence (#43): fio on this machine is one host, read
    assert m.evidence == ["hosts read 1 of 1", "evidence/seqread_1m.json"]
    assert m.note == ""


def test_seqwrite_bandwidth_uses_the_write_direction():
    m = _g1.bandwidth("seqwrite", step("seqwrite_1m.json"), limits(), NO_CEILINGS)
    assert m.value == pytest.approx(SEQWRITE_BW / 1e9)
    assert m.outcome is Outcome.PASS
    m = _g1.bandwidth("seqwrite", step("seqwrite_1m.json"), limits(seq_write_bw_min="5 GB/s"),
                      NO_CEILINGS)
    assert m.outcome is Outcome.FAIL


def test_kvrestore_bandwidth_sums_its_jobs():
    m = _g1.bandwidth("kvrestore", step("kvrestore.json"), limits(), NO_CEILINGS)
    assert m.value == pytest.approx(KV_BW / 1e9)
    assert m.outcome is Outcome.PASS
    m = _g1.bandwidth("kvrestore", step("kvrestore.json"), limits(kv_restore_bw_min="1.5 GB/s"),
                      NO_CEILINGS)
    assert m.outcome is Outcome.FAIL


def test_small_limits_are_shown_in_mb_per_s():
    m = _g1.bandwidth("seqread", step("seqread_1m.json"), limits(seq_read_bw_min="800 MB/s"),
                      NO_CEILINGS)
    assert (m.unit, m.limit.unit) == ("MB/s", "MB/s")
    assert m.value == pytest.approx(SEQREAD_BW / 1e6)
    assert m.limit.lo == pytest.approx(800)
    assert m.outcome is Outcome.PASS
    assert bandwidth_unit(999_999_999) == ("MB/s", 1e6)
    assert bandwidth_unit(1e9) == ("GB/s", 1e9)


def test_efficiency_against_the_ceiling():
    ceilings = Ceilings(read_bw="3 GB/s", write_bw="10 GB/s", label="test link")
    m = _g1.bandwidth("seqread", step("seqread_1m.json"), limits(), ceilings)
    assert m.note == "51 % of the 3 GB/s ceiling (test link)"
    m = _g1.bandwidth("seqwrite", step("seqwrite_1m.json"), limits(), ceilings)
    assert m.note == "46 % of the 10 GB/s ceiling (test link)"
    unlabelled = Ceilings(read_bw="3 GB/s")
    m = _g1.bandwidth("seqread", step("seqread_1m.json"), limits(), unlabelled)
    assert m.note == "51 % of the 3 GB/s ceiling"
    # a write ceiling alone says nothing about reads
    m = _g1.bandwidth("seqread", step("seqread_1m.json"), limits(), Ceilings(write_bw="3 GB/s"))
    assert m.note == ""


def test_missing_job_is_an_error_not_a_zero():
    m = _g1.bandwidth("kvrestore", step("seqread_1m.json"), limits(), NO_CEILINGS)
    assert m.outcome is Outcome.ERROR
    assert "no job named 'kvrestore'" in m.note
    assert m.value is None


# ---- QD1 latency ------------------------------------------------------------------------

def test_qd1_latency_pass_and_fail():
    p99 = qd1_p99_ns()
    assert p99 == report("randread_4k_qd1.json").jobs[0].read.clat_ns.percentile["99.000000"]
    passing = _g1.qd1_latency(step("randread_4k_qd1.json", QD1),
                              limits(randread_4k_qd1_p99_max=p99 * 1.01e-9))
    assert passing.outcome is Outcome.PASS
    assert passing.value == pytest.approx(p99 / 1e3)
    assert passing.unit == "µs"
    assert passing.note.startswith("N = 38015; p50 ")
    failing = _g1.qd1_latency(step("randread_4k_qd1.json", QD1),
                              limits(randread_4k_qd1_p99_max=p99 * 0.99e-9))
    assert failing.outcome is Outcome.FAIL
    assert failing.limit.hi == pytest.approx(p99 * 0.99e-3)


def test_qd1_latency_with_no_latency_counted_is_not_read():
    # fio counted every I/O in the ramp: the one host gave no latency, so nothing was read
    m = _g1.qd1_latency(step("zero_samples_ramp.json", {"ramp": "randread-qd1"}), limits())
    assert m.outcome is Outcome.ERROR and m.value is None
    assert (m.coverage.expected, m.coverage.read) == (1, 0)
    assert m.note == ("hosts read 0 of 1 (0%); not read: this machine job 'randread-qd1' "
                      "counted no completion latency (read clat N = 0)")


def _qd1_report(n: int) -> StepOutcome:
    document = {"jobs": [{"jobname": "randread-qd1", "read": {
        "iops": 1000, "clat_ns": {"N": n, "bins": {"50000": n - 1, "90000": 1}}}}]}
    return StepOutcome(report=parse_fio_json(json.dumps(document)))


def test_qd1_latency_needs_a_thousand_samples():
    short = _g1.qd1_latency(_qd1_report(999), limits())
    assert short.outcome is Outcome.ERROR and "only 999 I/Os" in short.note
    enough = _g1.qd1_latency(_qd1_report(1000), limits())
    assert enough.outcome is Outcome.PASS
    assert enough.value == pytest.approx(50.0)  # 999 of 1000 at 50 µs: p99 is 50 µs


def test_qd1_latency_without_percentiles():
    document = {"jobs": [{"jobname": "randread-qd1", "read": {"clat_ns": {"N": 5000}}}]}
    m = _g1.qd1_latency(StepOutcome(report=parse_fio_json(json.dumps(document))), limits())
    assert m.outcome is Outcome.ERROR and "no latency percentiles" in m.note


def test_qd1_latency_missing_job():
    m = _g1.qd1_latency(step("randread_4k_qd1.json"), limits())  # not renamed
    assert m.outcome is Outcome.ERROR and "no job named 'randread-qd1'" in m.note


# ---- QD sweep ---------------------------------------------------------------------------

def test_qd_sweep_pass_fail_and_curve():
    sweep = step("qd_sweep.json")
    m = _g1.qd_sweep(sweep, limits(), [1, 4, 16, 32])
    assert m.name == "4 KiB random read IOPS at QD32"
    assert m.value == pytest.approx(QD32_IOPS)
    assert m.outcome is Outcome.PASS
    assert m.note == ("IOPS by queue depth: QD1 17,497, QD4 49,491, QD16 81,167, "
                      "QD32 88,470")
    assert _g1.qd_sweep(sweep, limits(randread_4k_iops_min=90000), [1, 4, 16, 32]).outcome \
        is Outcome.FAIL


def test_qd_sweep_missing_depth_is_an_error():
    m = _g1.qd_sweep(step("qd_sweep.json"), limits(), [1, 4, 64])
    assert m.outcome is Outcome.ERROR
    assert "randread-qd64" in m.note


# ---- steady state -----------------------------------------------------------------------

def test_steady_state_attained_passes():
    spread, slope = _g1.steady_state(
        "seqread", step("steadystate_attained.json", {"ss-attained": "seqread"}), limits())
    assert spread.name == "Sequential read 1 MiB: steady-state spread"
    assert slope.name == "Sequential read 1 MiB: steady-state slope"
    assert spread.value == pytest.approx(5.028, abs=1e-3)
    assert slope.value == pytest.approx(5.307, abs=1e-3)
    assert (spread.outcome, slope.outcome) == (Outcome.PASS, Outcome.PASS)
    assert "fio steady state attained" in spread.note
    assert spread.limit.key == "g1.steady_state_spread_max"
    assert slope.limit.key == "g1.steady_state_slope_max"


def test_steady_state_limits_apply():
    spread, slope = _g1.steady_state(
        "seqread", step("steadystate_attained.json", {"ss-attained": "seqread"}),
        limits(steady_state_spread_max=5, steady_state_slope_max=5))
    assert (spread.outcome, slope.outcome) == (Outcome.FAIL, Outcome.FAIL)


def test_fio_not_attaining_is_reported_while_the_snia_rounds_decide():
    outcome = step("steadystate_not_attained.json", {"ss-not-attained": "seqwrite"})
    spread, slope = _g1.steady_state("seqwrite", outcome, limits())
    assert spread.value == pytest.approx(6.254, abs=1e-3)
    assert (spread.outcome, slope.outcome) == (Outcome.PASS, Outcome.PASS)
    assert "NOT attained" in spread.note and "the SNIA rounds decide" in spread.note


def test_steady_state_not_required_is_reported_only():
    outcome = step("steadystate_not_attained.json", {"ss-not-attained": "seqwrite"})
    spread, slope = _g1.steady_state("seqwrite", outcome, limits(steady_state_required=False))
    assert spread.outcome is slope.outcome is Outcome.NOT_APPLICABLE
    assert "6.25 %" in spread.note and "steady_state_required is false" in spread.note


def test_steady_state_missing_block():
    spread, slope = _g1.steady_state("seqread", step("seqread_1m.json"), limits())
    assert spread.outcome is slope.outcome is Outcome.ERROR
    assert "no steady-state block" in spread.note


def _two_hosts(second_bw: list[int], second_attained: int) -> StepOutcome:
    def entry(port, bw, attained):
        return {"jobname": "kvrestore", "hostname": f"host{port}", "port": port,
                "read": {"bw_bytes": sum(bw) / len(bw)},
                "steadystate": {"ss": "bw:20.000000%", "attained": attained,
                                "data": {"bw": bw}}}
    steady = [100, 101, 99, 100, 100]
    document = {"client_stats": [entry(1, steady, 1), entry(2, second_bw, second_attained),
                                 {"jobname": "All clients", "read": {}}]}
    # the hosts run_step planned the job on (#43: a rule is over the planned hosts)
    plan = {"kvrestore": ["host1", "host2"]}
    return StepOutcome(report=parse_fio_json(json.dumps(document)).model_copy(
        update={"planned": plan}))


def test_steady_state_judges_every_host():
    # the second host climbs steadily: its spread and slope are the gate's
    spread, slope = _g1.steady_state("kvrestore", _two_hosts([60, 80, 100, 120, 140], 1),
                                     limits())
    assert spread.value == pytest.approx(80.0)
    assert slope.value == pytest.approx(80.0)
    assert (spread.outcome, slope.outcome) == (Outcome.FAIL, Outcome.FAIL)
    assert spread.note.startswith("host2: ")


def test_steady_state_names_the_host_fio_found_unsteady():
    spread, _ = _g1.steady_state("kvrestore", _two_hosts([100, 100, 100, 100, 101], 0),
                                 limits())
    assert spread.outcome is Outcome.PASS
    assert "host2: fio steady state NOT attained" in spread.note


# ---- every rule on a failed step --------------------------------------------------------

def _all_rules(outcome: StepOutcome, ok: dict[str, StepOutcome] | None = None):
    """Every G1 rule's measurements for one step outcome (or per-rule outcomes)."""
    def pick(key):
        return (ok or {}).get(key, outcome)
    lim = limits()
    ceilings = Ceilings(read_bw="3 GB/s")
    return [
        _g1.bandwidth("seqread", pick("seqread"), lim, ceilings),
        _g1.bandwidth("seqwrite", pick("seqwrite"), lim, ceilings),
        _g1.bandwidth("kvrestore", pick("kvrestore"), lim, ceilings),
        *_g1.steady_state("seqread", pick("ss"), lim),
        *_g1.steady_state("kvrestore", pick("ss-kv"), lim),
        _g1.qd1_latency(pick("qd1"), lim),
        _g1.qd_sweep(pick("sweep"), lim, [1, 4, 16, 32]),
    ]


@pytest.mark.parametrize("failed", [
    StepOutcome(error="fio exited 1: boom", evidence=["evidence/fio-x.log"]),
    StepOutcome(evidence=["evidence/fio-x.log"])])
def test_every_rule_reports_an_error_with_its_name_and_limit(failed):
    good = {"seqread": step("seqread_1m.json"), "seqwrite": step("seqwrite_1m.json"),
            "kvrestore": step("kvrestore.json"),
            "ss": step("steadystate_attained.json", {"ss-attained": "seqread"}),
            "ss-kv": step("steadystate_attained.json", {"ss-attained": "kvrestore"}),
            "qd1": step("randread_4k_qd1.json", QD1), "sweep": step("qd_sweep.json")}
    measured = _all_rules(failed, good)
    errors = _all_rules(failed)
    assert all(m.outcome is not Outcome.ERROR for m in measured)
    for ok, bad in zip(measured, errors, strict=True):
        assert bad.outcome is Outcome.ERROR
        assert (bad.name, bad.limit, bad.unit) == (ok.name, ok.limit, ok.unit)
        assert bad.value is None
        assert bad.note == (failed.error or "fio produced no report")
        assert bad.evidence == ["evidence/fio-x.log"]


# ---- other I/O on the target's device during a job ---------------------------------------

MiB = 1024**2
SEQREAD_BYTES = report("seqread_1m.json").jobs[0].read.io_bytes


def test_other_io_beyond_what_fio_did_is_a_deviation():
    fio = report("seqread_1m.json")
    found = _g1.other_io("Sequential read, 1 MiB", "nvme1n1",
                         (SEQREAD_BYTES + 3 * MiB, 700 * MiB), fio)
    assert found.cause is Cause.OTHER_IO and found.blocks  # typed where found, not by its words
    text = found.text
    assert text.startswith("other I/O on the target's device nvme1n1 during 'Sequential read, "
                           "1 MiB': 703 MiB that fio did not do (read 3 MiB, written 700 MiB")
    assert "another process used the device" in text and "direct = false" not in text
    assert "direct = false" in _g1.other_io("x", "nvme1n1", (SEQREAD_BYTES, 700 * MiB), fio,
                                            buffered=True).text


def test_a_device_not_watched_is_a_typed_deviation():
    found = _g1.not_watched("fio runs on 10.0.0.2, whose devices kvgate does not see")
    assert found.cause is Cause.IO_NOT_WATCHED and found.blocks
    assert found.text == ("other processes' I/O on the target was not watched: fio runs on "
                          "10.0.0.2, whose devices kvgate does not see")


def test_noise_and_what_fio_itself_did_are_not_a_deviation():
    fio = report("seqread_1m.json")
    assert _g1.other_io("x", "nvme1n1", (SEQREAD_BYTES, 8 * MiB), fio) is None  # the journal
    share = int(SEQREAD_BYTES * _g1.OTHER_IO_SHARE)  # up to 10 % of fio's bytes is noise
    assert _g1.other_io("x", "nvme1n1", (SEQREAD_BYTES, share), fio) is None
    assert _g1.other_io("x", "nvme1n1", (SEQREAD_BYTES, share + MiB), fio) is not None
    # the page cache served some reads: fewer device reads than fio's are no other I/O
    assert _g1.other_io("x", "nvme1n1", (SEQREAD_BYTES // 2, 0), fio) is None


def test_other_io_needs_a_device_and_a_report_and_unread_counters_are_not_watched():
    fio = report("seqread_1m.json")
    assert _g1.other_io("x", "", (0, 10**12), fio) is None
    # A job fio ran while the device's counters could not be read: nobody watched it (before:
    # no deviation at all, as if the device had been quiet).
    unread = _g1.other_io("Sequential read, 1 MiB", "vda", None, fio)
    assert unread.cause is Cause.IO_NOT_WATCHED and unread.text == (
        "other processes' I/O on the target was not watched: the counters of vda "
        "(/sys/class/block/vda/stat) could not be read around 'Sequential read, 1 MiB'")
    assert _g1.other_io("x", "vda", (0, 10**12), None) is None


@pytest.mark.skipif(shutil.which("fio") is None or shutil.which("dd") is None,
                    reason="needs fio and dd")
def test_a_g1_run_records_another_process_writing_to_its_device(tmp_path, repo, tiny_site):
    """The reported case, two loads on one array: G1 says the device was shared."""
    device, why = watched_device(tmp_path)
    if not device:
        pytest.skip(why)
    other = tmp_path / "other"  # same filesystem, outside the target, ours to write
    other.mkdir()
    writer = subprocess.Popen(
        ["sh", "-c", "while :; do dd if=/dev/zero of=blob bs=1M count=64 oflag=direct "
         "conv=notrunc status=none || exit 1; done"], cwd=other, start_new_session=True)
    try:
        site = tiny_site(tmp_path / "target")
        assert 'latency_runtime = "3s"' in site
        site = site.replace('latency_runtime = "3s"', 'latency_runtime = "2s"')
        (tmp_path / "site.toml").write_text(site)
        done = subprocess.run([sys.executable, "-m", "gates.cli", "run", "g1", "--site",
                               str(tmp_path / "site.toml"), "--thresholds",
                               str(repo / "thresholds.toml"), "--out", str(tmp_path / "reports")],
                              capture_output=True, text=True, timeout=300)
    finally:
        os.killpg(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
    assert writer.returncode != 1, "dd could not write to the filesystem with O_DIRECT"
    [record_file] = (tmp_path / "reports").glob("*/g1.json")
    deviations = json.loads(record_file.read_text())["deviations"]
    # typed where G1 found it: the record holds its cause beside its words
    lines = [d["text"] for d in deviations if isinstance(d, dict)
             and d["cause"] == Cause.OTHER_IO
             and d["text"].startswith(f"other I/O on the target's device {device} ")]
    assert lines, (deviations, done.stdout[-2000:])
    assert all("MiB that fio did not do" in d and "written" in d for d in lines)


# ---- data integrity: the write-then-verify job ---------------------------------------------

def recorded_verify() -> tuple[FioReport, str]:
    """fio 3.33's report and stderr of G1's verify job with three blocks flipped on read."""
    return (parse_fio_json((DATA / "verify_flipped.json").read_text()),
            (DATA / "verify_flipped.stderr.txt").read_text())


def test_recorded_verify_failures_fail_naming_every_block():
    from gates.storage.fioerrors import parse_verify_failures

    report, stderr = recorded_verify()
    failures = parse_verify_failures(stderr)
    assert [(f.offset, f.length) for f in failures] == [(786432, 262144), (1310720, 262144),
                                                        (1048576, 262144)]
    assert failures[1].what == "verify: bad magic header 5335, wanted acca"
    m = _g1.verify_errors(StepOutcome(report=report, verify_failures=failures))
    assert (m.outcome, m.value, m.id) == (Outcome.FAIL, 3, "g1.verify_errors")
    assert m.note.startswith("3 blocks read back other than written, 16 MiB read back of "
                             "16 MiB written: crc32c: verify failed at "), m.note
    assert "kvgate-verify.dat offset 786432 length 262144" in m.note


def test_a_verify_mismatch_is_counted_by_the_rule_not_reported_as_a_job_error():
    """fio ends the verify job with EILSEQ (84) for its mismatches: G1's job errors leave that
    to g1.verify_errors; the same errno in any other job is a job error."""
    from gates.core.configuration import FioSettings
    from gates.storage.fioerrors import job_errors
    from gates.storage.jobs import verify_step

    report, stderr = recorded_verify()
    assert job_errors(report, verify_step(FioSettings(file_size="16MiB")), stderr) == ""
    other = verify_step(FioSettings(file_size="16MiB"))
    other.jobs[0].options.pop("continue_on_error")
    assert "job verify: error 84 (EILSEQ" in job_errors(report, other, stderr)


def test_an_eilseq_without_failure_lines_or_total_err_still_fails():
    """fio said EILSEQ but its lines were lost: at least one block failed, never a PASS."""
    document = json.loads((DATA / "verify_flipped.json").read_text())
    document["jobs"][0]["total_err"] = 0
    m = _g1.verify_errors(StepOutcome(report=parse_fio_json(json.dumps(document))))
    assert (m.outcome, m.value) == (Outcome.FAIL, 1), m.note


def test_a_verify_job_that_read_back_less_than_it_wrote_is_an_error():
    """Unread blocks are unverified: 0 mismatches over a partial read-back is no PASS."""
    document = json.loads((DATA / "verify_flipped.json").read_text())
    job = document["jobs"][0]
    job.update(error=0, total_err=0)
    job["read"]["io_bytes"] = 8 * 1024**2
    m = _g1.verify_errors(StepOutcome(report=parse_fio_json(json.dumps(document))))
    assert m.outcome is Outcome.ERROR, m.note
    assert "checked only 8 MiB read back of 16 MiB written" in m.note, m.note


def test_no_verify_job_in_the_report_is_an_error():
    m = _g1.verify_errors(step("seqwrite_1m.json"))
    assert m.outcome is Outcome.ERROR and "no job named 'verify'" in m.note, m.note
