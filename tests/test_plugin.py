"""The pytest layer: markers, deselection, measurements into gate records, chaining, BLOCKED."""

import json
import shutil
import textwrap

import pytest

from gates._store import Store
from gates._verdict import Outcome

SUITE = """
import pytest
from gates import Limit, Measurement

pytestmark = [pytest.mark.gate, pytest.mark.{gate}]


def test_figure(check):
    check(Measurement.measured("figure", {value}, Limit.at_least(10, "GB/s", key="x.min")))


def test_crashes():
    {crash}
"""


@pytest.fixture
def gate_dir(pytester, repo):
    """A pytester folder with the shipped thresholds and a tiny site file."""
    shutil.copy(repo / "thresholds.toml", pytester.path / "thresholds.toml")
    (pytester.path / "site.toml").write_text(textwrap.dedent("""
        [site]
        name = "plugin test"
        [target]
        directory = "target"
        [fio]
        file_size = "1MiB"
    """))
    return pytester


def write_suite(pytester, gate, value=12.0, crash="pass"):
    pytester.makepyfile(**{f"test_{gate}_suite": SUITE.format(gate=gate, value=value,
                                                               crash=crash)})


def records(pytester):
    store = Store(pytester.path / "reports")
    try:
        rows = store.db.execute("SELECT body FROM gate_records ORDER BY id").fetchall()
        return [json.loads(r["body"]) for r in rows]
    finally:
        store.close()


def test_plain_pytest_deselects_gate_checks(gate_dir):
    write_suite(gate_dir, "g1")
    gate_dir.makeini("[pytest]\ntestpaths = .\n")
    result = gate_dir.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(deselected=2)
    assert not (gate_dir.path / "reports").exists()


def test_unknown_marker_is_an_error(gate_dir):
    gate_dir.makepyfile(test_x="import pytest\n@pytest.mark.g9\ndef test_a(): pass\n")
    result = gate_dir.runpytest("--strict-markers")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'g9' not found in `markers`*"])


def test_gate_record_computed_from_measurements(gate_dir):
    write_suite(gate_dir, "g1", value=12.0)
    result = gate_dir.runpytest("-m", "g1")
    result.assert_outcomes(passed=2)
    [record] = records(gate_dir)
    assert record["verdict"] == "PASS"
    assert [m["name"] for m in record["measurements"]] == ["figure"]
    html = next((gate_dir.path / "reports").glob("*/g1.html")).read_text()
    assert "Verdict: PASS" in html and "x &gt;= 10 GB/s" in html and "<script" not in html


def test_failing_measurement_fails_the_gate_and_the_test(gate_dir):
    write_suite(gate_dir, "g1", value=3.0)
    result = gate_dir.runpytest("-m", "g1")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAIL: figure = 3 GB/s; limit x >= 10 GB/s*"])
    assert records(gate_dir)[0]["verdict"] == "FAIL"


def test_crashing_check_is_recorded_as_error(gate_dir):
    write_suite(gate_dir, "g1", crash="raise RuntimeError('endpoint down')")
    gate_dir.runpytest("-m", "g1")
    [record] = records(gate_dir)
    errors = [m for m in record["measurements"] if m["outcome"] == "ERROR"]
    assert record["verdict"] == "ERROR"
    assert errors and "endpoint down" in errors[0]["note"]


def test_downstream_gate_blocked_without_upstream_pass(gate_dir):
    write_suite(gate_dir, "g2")
    result = gate_dir.runpytest("-m", "g2", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*BLOCKED: no G1 record for site 'plugin test'*"])
    [record] = records(gate_dir)
    assert record["gate"] == "g2" and record["verdict"] == "BLOCKED"


def test_downstream_gate_blocked_by_failed_upstream_then_forced(gate_dir):
    write_suite(gate_dir, "g1", value=1.0)
    gate_dir.runpytest("-m", "g1")
    write_suite(gate_dir, "g2")
    blocked = gate_dir.runpytest("-m", "g2", "-rs")
    blocked.stdout.fnmatch_lines(["*BLOCKED: G1 did not pass*FAIL*"])
    forced = gate_dir.runpytest("-m", "g2", "--force")
    forced.assert_outcomes(passed=2)
    g2 = records(gate_dir)[-1]
    assert g2["forced"] is True and g2["verdict"] == "PASS"
    assert g2["upstream"]["verdict"] == "FAIL"
    assert any("FORCED" in d for d in g2["deviations"])
    html = (gate_dir.path / "reports" / g2["run_id"] / "g2.html").read_text()
    assert "FORCED" in html


def test_passing_upstream_unblocks_and_is_cited(gate_dir):
    write_suite(gate_dir, "g1")
    gate_dir.runpytest("-m", "g1")
    write_suite(gate_dir, "g2")
    gate_dir.runpytest("-m", "g2").assert_outcomes(passed=2)
    g1, g2 = records(gate_dir)
    store = Store(gate_dir.path / "reports")
    digest = store.latest_record("g1", "plugin test")[1]
    store.close()
    assert g2["upstream"] == {"gate": "g1", "run_id": g1["run_id"], "verdict": "PASS",
                              "record_sha256": digest}


def test_configuration_typo_stops_with_exit_2(gate_dir):
    write_suite(gate_dir, "g1")
    site = gate_dir.path / "site.toml"
    site.write_text(site.read_text().replace("file_size", "file_sise"))
    result = gate_dir.runpytest("-m", "g1")
    assert result.ret == 2
    result.stdout.fnmatch_lines(["*configuration error: site.toml*",
                                 "*unknown key 'fio.file_sise' — did you mean 'file_size'?*"])


def test_outcome_enum_matches_report_text():
    assert Outcome.NOT_APPLICABLE.value == "NOT APPLICABLE"


def test_one_session_chains_gates_in_order(gate_dir):
    """`kvgate run all`: G1's record is signed before G2 asks whether G1 passed."""
    write_suite(gate_dir, "g1")
    write_suite(gate_dir, "g2")
    result = gate_dir.runpytest("-m", "g1 or g2", "test_g1_suite.py", "test_g2_suite.py")
    result.assert_outcomes(passed=4)
    g1, g2 = records(gate_dir)
    assert g1["run_id"] == g2["run_id"] and g2["verdict"] == "PASS"
    assert g2["upstream"]["run_id"] == g1["run_id"]


def test_one_session_blocks_after_a_failing_gate(gate_dir):
    write_suite(gate_dir, "g1", value=1.0)
    write_suite(gate_dir, "g2")
    gate_dir.runpytest("-m", "g1 or g2", "test_g1_suite.py", "test_g2_suite.py")
    g1, g2 = records(gate_dir)
    assert g1["verdict"] == "FAIL" and g2["verdict"] == "BLOCKED"
