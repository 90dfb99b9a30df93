"""The kvgate command line: help, config check, and a real G1 run through the suites."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from _edits import edited
from _timing import accept_unfair

from gates.cli import main, suites_for, summary_exit_code
from gates.core.verdicts import GateRecord, Measurement, Outcome


def test_help_shows_examples_and_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "kvgate run g1 --site" in out and "3 blocked" in out


def test_config_check_prints_resolved_configuration(repo, capsys, monkeypatch):
    monkeypatch.chdir(repo)
    assert main(["config", "check"]) == 0
    out = capsys.readouterr().out
    assert "revision 2026.12-8" in out and "limits profile 'demo'" in out
    assert '"seq_read_bw_min": "0.05 GB/s"' in out


def test_config_check_names_file_and_key_of_a_typo(tmp_path, repo, capsys):
    site = tmp_path / "site.toml"
    site.write_text(edited((repo / "site.toml").read_text(), "min_free", "min_fre",
                           where="site.toml", count=None))
    code = main(["config", "check", "--site", str(site), "--thresholds",
                 str(repo / "thresholds.toml")])
    err = capsys.readouterr().err
    assert code == 2
    assert str(site) in err and "target.min_fre" in err and "did you mean 'min_free'" in err


def test_every_gate_has_a_suite():
    assert all(suites_for(gate) for gate in ("g1", "g2", "g3", "g4"))
    assert [p.name for p in suites_for("g1")] == [
        "test_g1_arrival.py", "test_g1_config.py", "test_g1_shared.py"]


@pytest.mark.parametrize("verdicts, code", [
    (["PASS"], 0), (["FAIL"], 1), (["MARGINAL"], 1), (["ERROR"], 2), (["BLOCKED"], 3),
    (["PASS", "FAIL", "BLOCKED"], 1), ([], 2)])
def test_exit_code_is_decided_by_the_first_gate_that_did_not_pass(verdicts, code):
    records = [GateRecord(gate=f"g{i + 1}", run_id="r", site="s", started="t", measurements=[
        Measurement(name="m", outcome=Outcome(v))]) for i, v in enumerate(verdicts)]
    assert summary_exit_code(records) == code


FIO_KEYS = {"g1.seq_read_bw_min", "g1.seq_write_bw_min", "g1.kv_restore_bw_min",
            "g1.randread_4k_qd1_p99_max", "g1.randread_4k_iops_min",
            "g1.steady_state_spread_max", "g1.steady_state_slope_max"}


# held at a fixed 0, with no thresholds key
FIO_IDS = {"g1.verify_errors"}


def fio_measurements(record):
    """The measurements G1 takes with fio (the configuration checks are the rest)."""
    return [m for m in record["measurements"] if m["limit"] and (
        m["limit"]["key"] in FIO_KEYS or m.get("id") in FIO_IDS)]


def _run_g1(tmp_path, site_text, thresholds):
    """`kvgate run g1` as a user runs it, in a child process; returns it and the G1 record."""
    (tmp_path / "site.toml").write_text(site_text)
    out = tmp_path / "reports"
    done = subprocess.run([sys.executable, "-m", "gates.cli", "run", "g1", "--site",
                           str(tmp_path / "site.toml"), "--thresholds", str(thresholds),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    [record_file] = out.glob("*/g1.json")
    return done, json.loads(record_file.read_text())


@pytest.mark.skipif(shutil.which("fio") is None,
                    reason="fio is not installed (apt-get install fio)")
def test_unmeetable_threshold_fails_g1_with_real_fio(tmp_path, repo, tiny_site):
    """Real fio on a temporary directory; one impossible limit, the rest relaxed for stability."""
    thresholds = (repo / "thresholds.toml").read_text()
    for old, new in (('seq_read_bw_min = "50 MB/s"', 'seq_read_bw_min = "1000 TB/s"'),
                     ('steady_state_spread_max = "20 %"', 'steady_state_spread_max = "1000 %"'),
                     ('steady_state_slope_max = "10 %"', 'steady_state_slope_max = "1000 %"'),
                     ("steady_state_required = true", "steady_state_required = false"),
                     ("randread_4k_iops_min = 1000", "randread_4k_iops_min = 1")):
        thresholds = edited(thresholds, old, new, where="thresholds.toml")
    (tmp_path / "thresholds.toml").write_text(thresholds)
    done, record = _run_g1(tmp_path, tiny_site(tmp_path / "target"), tmp_path / "thresholds.toml")
    assert done.returncode == 1, done.stdout + done.stderr
    record_file = next((tmp_path / "reports").glob("*/g1.json"))
    by_name = {m["name"]: m for m in record["measurements"]}
    seq = by_name["Sequential read 1 MiB bandwidth"]
    assert record["verdict"] == "FAIL" and seq["outcome"] == "FAIL"
    assert seq["value"] > 0 and seq["limit"]["key"] == "g1.seq_read_bw_min"
    others = [m for m in record["measurements"] if m is not seq]
    # The QD1 latency job's 3 s give thousands of I/Os on a quiet machine; on one with more
    # runnable processes than CPUs fio may complete fewer than a p99 needs, and G1 says so
    # (ERROR): the machine's doing, accepted visibly (tests/_timing.py), never silently, and
    # only then; on a machine that was not oversubscribed it fails the test.
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    starved = [m for m in others if m["outcome"] == "ERROR" and load > cpus and re.fullmatch(
        r"only \d+ I/Os; a p99 needs at least 1000 .*", m["note"], re.S)]
    for m in starved:
        accept_unfair(record, f"{m['name']}: {m['note']}; load average {load:.1f} on {cpus} "
                              "CPUs")
    assert all(m["outcome"] in ("PASS", "NOT APPLICABLE") for m in others
               if m not in starved), others
    assert any(m["name"] == "Required mount options" and m["outcome"] == "PASS"
               for m in others), "the configuration checks ran too"
    assert record["tool_versions"]["fio"].startswith("fio-")
    evidence = record_file.parent / "evidence"
    assert set(record["evidence"]) == {f"evidence/{p.name}" for p in evidence.iterdir()}
    html = record_file.with_suffix(".html").read_text()
    assert "Verdict: FAIL" in html and html.index("Sequential read 1 MiB bandwidth") < \
        html.index("Sequential write 1 MiB bandwidth")
    assert html.count("<svg") >= 3 and "fio bandwidth per job against its minimum" in html
    assert "4 KiB random-read latency percentiles" in html
    run = record_file.parent
    assert (run / "summary.html").is_file() and (run / "summary.json").is_file()
    bundle = tmp_path / "reports" / f"{run.name}.bundle.tar.gz"
    assert bundle.is_file() and f"kvgate verify {bundle}" in done.stdout.replace("\n", "")
    # Intact, but nobody signed it (the tests run without a performer's key): exit 4, never 0.
    assert main(["verify", str(bundle)]) == 4
    # the verify job's file, and no fio *-verify.state or dump file beside it
    assert sorted(p.name for p in (tmp_path / "target").iterdir()) == [
        "kvgate-read.dat", "kvgate-verify.dat", "kvgate-write.dat"]


def test_missing_fio_is_an_error_with_the_install_hint(tmp_path, repo, tiny_site):
    site = tiny_site(tmp_path / "target").replace('[fio]\n', '[fio]\nbinary = "fio-absent"\n')
    done, record = _run_g1(tmp_path, site, repo / "thresholds.toml")
    assert done.returncode == 2
    assert record["verdict"] == "ERROR"
    assert len(fio_measurements(record)) == 12
    assert all(m["outcome"] == "ERROR" and "apt-get install fio" in m["note"]
               for m in fio_measurements(record))


def test_missing_target_directory_is_refused_before_writing(tmp_path, repo, tiny_site):
    site = tiny_site(tmp_path / "absent" / "target")
    done, record = _run_g1(tmp_path, site, repo / "thresholds.toml")
    assert done.returncode == 2
    assert record["verdict"] == "ERROR" and len(fio_measurements(record)) == 12
    assert all(m["outcome"] == "ERROR" and "cannot create target directory" in m["note"]
               for m in fio_measurements(record))
    assert not (tmp_path / "absent").exists()
