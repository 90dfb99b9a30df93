"""The pytest layer: markers, deselection, measurements into gate records, chaining, BLOCKED."""

import json
import re

import pytest

from gates.core.configuration.config import load_thresholds
from gates.core.verdicts import DECLARED, Outcome
from gates.store import Store

SUITE = """
import pytest
from gates import Limit, Measurement

pytestmark = [pytest.mark.gate, pytest.mark.{gate}]


def test_figure(check):
    check(Measurement.measured("figure", {value}, Limit.at_least(10, "GB/s", key="x.min")))


def test_crashes():
    {crash}


def test_the_rest(check, kvgate):
    # Every other measurement the gate declares: the suite measures its gate whole.
    from _chain import read_all
    from gates.core.verdicts import DECLARED

    check(*[read_all(d, 12.0, Limit.at_least(10, "GB/s"), at)
            for d, at in DECLARED["{gate}"].required(kvgate.scope("{gate}"))])
"""




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
    result.assert_outcomes(deselected=3)
    assert not (gate_dir.path / "reports").exists()


def test_unknown_marker_is_an_error(gate_dir):
    gate_dir.makepyfile(test_x="import pytest\n@pytest.mark.g9\ndef test_a(): pass\n")
    result = gate_dir.runpytest("--strict-markers")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'g9' not found in `markers`*"])


def test_gate_record_computed_from_measurements(gate_dir):
    write_suite(gate_dir, "g1", value=12.0)
    result = gate_dir.runpytest("-m", "g1")
    result.assert_outcomes(passed=3)
    [record] = records(gate_dir)
    assert record["verdict"] == "PASS"
    assert [m["name"] for m in record["measurements"]][0] == "figure"
    assert not any(m.get("id") == "g1.complete" for m in record["measurements"])
    html = next((gate_dir.path / "reports").glob("*/g1.html")).read_text()
    assert "Verdict: PASS" in html and "x &gt;= 10 GB/s" in html and "<script" not in html


def test_failing_measurement_fails_the_gate_and_the_test(gate_dir):
    write_suite(gate_dir, "g1", value=3.0)
    result = gate_dir.runpytest("-m", "g1")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*FAIL: figure = 3 GB/s; limit x >= 10 GB/s*"])
    assert records(gate_dir)[0]["verdict"] == "FAIL"


def test_an_unknown_checklist_id_stops_a_pytest_run_before_any_check(gate_dir):
    """`pytest -m g1 --checklist-id X` said nothing and ran without the answers (issue #27)."""
    write_suite(gate_dir, "g1")
    result = gate_dir.runpytest("-m", "g1", "--checklist-id", "20261129T170000Z-000000")
    assert result.ret == 2
    result.stdout.fnmatch_lines(["*--checklist-id 20261129T170000Z-000000: there is no store*"])
    assert records(gate_dir) == []


@pytest.mark.parametrize("run_id", ["../../escape", "a/b", ".."])
def test_a_run_id_that_is_no_plain_folder_name_is_refused_as_it_is_parsed(gate_dir, run_id):
    write_suite(gate_dir, "g1")
    result = gate_dir.runpytest("-m", "g1", "--run-id", run_id)
    assert result.ret == 4  # pytest's usage error: nothing ran, nothing written
    result.stderr.fnmatch_lines([f"*--run-id*invalid run id {run_id!r}*plain folder name*"])
    assert not (gate_dir.path / "reports").exists()


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
    result.assert_outcomes(skipped=3)
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
    forced.assert_outcomes(passed=3)
    g2 = records(gate_dir)[-1]
    assert g2["forced"] is True and g2["verdict"] == "PASS"
    assert g2["upstream"]["verdict"] == "FAIL"
    assert [d["cause"] for d in g2["deviations"]] == ["forced past upstream"]
    assert g2["deviations"][0]["text"].startswith("FORCED: run despite the upstream gate: G1")
    html = (gate_dir.path / "reports" / g2["run_id"] / "g2.html").read_text()
    assert "FORCED" in html


def test_passing_upstream_unblocks_and_is_cited(gate_dir):
    write_suite(gate_dir, "g1")
    gate_dir.runpytest("-m", "g1")
    write_suite(gate_dir, "g2")
    gate_dir.runpytest("-m", "g2").assert_outcomes(passed=3)
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
    result.assert_outcomes(passed=6)
    g1, g2 = records(gate_dir)
    assert g1["run_id"] == g2["run_id"] and g2["verdict"] == "PASS"
    assert g2["upstream"]["run_id"] == g1["run_id"]


def test_one_session_blocks_after_a_failing_gate(gate_dir):
    write_suite(gate_dir, "g1", value=1.0)
    write_suite(gate_dir, "g2")
    gate_dir.runpytest("-m", "g1 or g2", "test_g1_suite.py", "test_g2_suite.py")
    g1, g2 = records(gate_dir)
    assert g1["verdict"] == "FAIL" and g2["verdict"] == "BLOCKED"


TWO = """
import pytest
from gates import Limit, Measurement

pytestmark = [pytest.mark.gate, pytest.mark.g1]


def test_two(check):
    check(Measurement.measured("read", 12.0, Limit.at_least(10, "GB/s")),
          Measurement.measured("write", 3.0, Limit.at_least(4, "GB/s")))
"""


def junit_properties(path):
    """{testcase name: [(property name, value), …]} from a JUnit XML file."""
    import xml.etree.ElementTree as ET

    return {case.get("name"): [(p.get("name"), p.get("value"))
                               for p in case.iter("property")]
            for case in ET.parse(path).getroot().iter("testcase")}


def html_rows(path):
    """pytest-html 4's table: the header cells and each test's row cells from its JSON blob."""
    import html

    text = path.read_text()
    blob = re.search(r'data-jsonblob="([^"]*)"', text).group(1)
    tests = json.loads(html.unescape(blob))["tests"]
    return text, {nodeid.split("::")[-1]: runs[0]["resultsTableRow"]
                  for nodeid, runs in tests.items()}


def test_junit_xml_carries_each_measurement_as_properties(gate_dir):
    write_suite(gate_dir, "g1", crash="raise RuntimeError('endpoint down')")
    gate_dir.runpytest("-m", "g1", "--junitxml=junit.xml")
    cases = junit_properties(gate_dir.path / "junit.xml")
    assert cases["test_figure"] == [
        ("kvgate.figure.value", "12.0"), ("kvgate.figure.unit", "GB/s"),
        ("kvgate.figure.limit", "x >= 10 GB/s"), ("kvgate.figure.outcome", "PASS"),
        ("kvgate.figure.margin", "2.0")]
    crashed = dict(cases["test_crashes"])
    assert crashed["kvgate.test_crashes.outcome"] == "ERROR"
    assert crashed["kvgate.test_crashes.value"] == ""
    assert "endpoint down" in crashed["kvgate.test_crashes.note"]


def test_pytest_html_shows_value_limit_and_outcome_columns(gate_dir):
    write_suite(gate_dir, "g1", crash="raise RuntimeError('endpoint down')")
    gate_dir.makepyfile(test_g1_two=TWO)
    gate_dir.runpytest("-m", "g1", "--html=report.html", "--self-contained-html")
    text, rows = html_rows(gate_dir.path / "report.html")
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", text)
    assert headers[headers.index("Test") + 1:][:3] == ["Value", "Limit", "Outcome"]
    assert rows["test_figure"][2:5] == ['<td class="col-kvgate-value">12 GB/s</td>',
                                        '<td class="col-kvgate-limit">x &gt;= 10 GB/s</td>',
                                        '<td class="col-kvgate-outcome">PASS</td>']
    assert rows["test_two"][2:5] == [
        '<td class="col-kvgate-value">read: 12 GB/s<br>write: 3 GB/s</td>',
        '<td class="col-kvgate-limit">x &gt;= 10 GB/s<br>x &gt;= 4 GB/s</td>',
        '<td class="col-kvgate-outcome">PASS<br>FAIL</td>']
    assert rows["test_crashes"][2:5] == ['<td class="col-kvgate-value">—</td>',
                                         '<td class="col-kvgate-limit">—</td>',
                                         '<td class="col-kvgate-outcome">ERROR</td>']


def test_blocked_check_shows_its_outcome_in_both_reports(gate_dir):
    write_suite(gate_dir, "g2")
    gate_dir.runpytest("-m", "g2", "--html=report.html", "--junitxml=junit.xml")
    _, rows = html_rows(gate_dir.path / "report.html")
    assert rows["test_figure"][4] == '<td class="col-kvgate-outcome">BLOCKED</td>'
    props = dict(junit_properties(gate_dir.path / "junit.xml")["test_figure"])
    assert props["kvgate.test_figure.outcome"] == "BLOCKED"


def test_without_pytest_html_the_columns_are_not_registered(gate_dir):
    write_suite(gate_dir, "g1")
    gate_dir.runpytest("-m", "g1", "-p", "no:html").assert_outcomes(passed=3)


def test_measurement_rows_group_repeated_names():
    from gates.core.verdicts import Limit, Measurement
    from gates.plugin import measurement_properties, measurement_rows

    limit = Limit.at_most(5, "%")
    spread = [Measurement.measured("a.b spread", v, limit) for v in (1.0, 9.0)]
    props = [("other", "x")] + [p for m in spread for p in measurement_properties(m)]
    rows = measurement_rows(props)
    assert [(name, f["value"], f["outcome"]) for name, f in rows] == [
        ("a.b spread", "1.0", "PASS"), ("a.b spread", "9.0", "FAIL")]


def test_a_site_naming_its_array_gets_cost_lines_in_the_summary(gate_dir):
    site = gate_dir.path / "site.toml"
    site.write_text(site.read_text().replace('name = "plugin test"',
                                             'name = "plugin test"\narray = "FX100"'))
    write_suite(gate_dir, "g1")
    gate_dir.runpytest("-m", "g1", "-p", "no:html")
    [summary] = (gate_dir.path / "reports").glob("*/summary.json")
    cost = json.loads(summary.read_text())["cost"]
    assert cost["configured"] and cost["array"] == "FX100" and cost["figures"]


# ---- #25 item 12: a gate run in part is INCOMPLETE, and blocks the next ----------------------

def test_a_gate_whose_checks_were_deselected_is_incomplete_and_blocks_the_next(gate_dir):
    write_suite(gate_dir, "g1")
    gate_dir.runpytest("-m", "g1", "-k", "figure").assert_outcomes(passed=1, deselected=2)
    [g1] = records(gate_dir)
    assert g1["verdict"] == "ERROR"
    [incomplete] = [m for m in g1["measurements"] if m.get("id") == "g1.complete"]
    assert incomplete["outcome"] == "ERROR" and incomplete["note"].startswith("INCOMPLETE: ")
    assert "not measured: g1.seq_read_bw, g1.seq_write_bw" in incomplete["note"]
    assert "checks not run: test_crashes, test_the_rest" in incomplete["note"]
    write_suite(gate_dir, "g2")
    blocked = gate_dir.runpytest("-m", "g2", "-rs")
    blocked.stdout.fnmatch_lines([f"*BLOCKED: G1 did not pass (run {g1['run_id']}: ERROR)*"])
    assert records(gate_dir)[-1]["verdict"] == "BLOCKED"


def test_a_requested_gate_none_of_whose_checks_ran_still_gets_a_record(gate_dir):
    write_suite(gate_dir, "g1")
    gate_dir.runpytest("-m", "g1", "-k", "no_such_check")
    [g1] = records(gate_dir)
    [only] = g1["measurements"]
    assert g1["verdict"] == "ERROR" and only["id"] == "g1.complete"
    assert "checks not run: test_figure, test_crashes, test_the_rest" in only["note"]


def test_a_gate_measured_whole_but_one_level_short_is_incomplete(gate_dir):
    write_suite(gate_dir, "g1")
    gate_dir.runpytest("-m", "g1")
    write_suite(gate_dir, "g2")
    suite = gate_dir.path / "test_g2_suite.py"
    top = 'max(kvgate.thresholds.g2.concurrency)'
    suite.write_text(suite.read_text().replace(  # every id, but not at the highest level
        "for d, at in", "for d, at in (x for x in").replace(
        'kvgate.scope("g2"))])', f'kvgate.scope("g2")) if x[1] != {top})])'))
    gate_dir.runpytest("-m", "g2")
    g2 = records(gate_dir)[-1]
    [incomplete] = [m for m in g2["measurements"] if m.get("id") == "g2.complete"]
    levels = load_thresholds(gate_dir.path / "thresholds.toml")[0].g2.concurrency
    ids = [i for i in DECLARED["g2"].by_id if i not in ("g2.arm_protocol", "g2.complete")]
    assert incomplete["note"].startswith("INCOMPLETE: not measured: " + ", ".join(
        f"{i} @ concurrency {max(levels)}" for i in ids) + " (")
    assert g2["verdict"] == "ERROR"
