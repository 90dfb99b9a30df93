"""A comparison stands on the records it cites (#45 item 1): `kvgate compare` verifies each one
(its digest, evidence and signature, and that it is the record the store holds) before it ranks
anything, and `kvgate verify` of a comparison verifies them again, naming the altered record.
"""

import json
import os
import subprocess
import sys

import pytest
from test_compare import chain, gains

from gates.report import CompareError, compare, examine, write_comparison
from gates.report.verification import record_digest
from gates.store import Store


@pytest.fixture
def reports(tmp_path):
    with Store(tmp_path) as store:
        chain(store, "run-fast", gains(60.0, 45.0))
        chain(store, "run-slow", gains(30.0, 31.0))
    return tmp_path


def _edit(path, rehash=False, **fields):
    body = json.loads(path.read_text()) | fields
    if rehash:
        body["record_sha256"] = record_digest(body)
    path.write_text(json.dumps(body, indent=2) + "\n")


def _compare(reports):
    with Store.reading(reports) as store:
        return compare(store, [("run-slow", "FX100"), ("run-fast", "FX300")])


def test_compare_refuses_a_cited_record_edited_after_it_was_written(reports):
    _edit(reports / "run-fast" / "g3.json", verdict="ERROR")
    with pytest.raises(CompareError, match=r"run-fast/g3\.json: the record was altered"):
        _compare(reports)


def test_compare_refuses_a_cited_record_edited_and_rehashed(reports):
    _edit(reports / "run-slow" / "g1.json", rehash=True, verdict="FAIL")
    with pytest.raises(CompareError, match=r"run-slow/g1\.json.* not the record the store"):
        _compare(reports)


def test_compare_refuses_a_cited_record_whose_signature_does_not_hold(reports):
    (reports / "run-fast" / "g2.json.sig").write_text("not a signature\n")
    with pytest.raises(CompareError, match=r"run-fast/g2\.json\.sig"):
        _compare(reports)


def test_compare_refuses_a_cited_record_that_is_gone(reports):
    (reports / "run-slow" / "g4.json").unlink()
    with pytest.raises(CompareError, match=r"run-slow/g4\.json: missing"):
        _compare(reports)


def test_verify_of_a_comparison_re_verifies_what_it_cites(reports):
    folder = write_comparison(reports, _compare(reports), None)["json"].parent
    assert examine(folder).problems == []
    _edit(reports / "run-fast" / "g3.json", verdict="PASS", measurements=[])
    problems = examine(folder).problems
    assert any(p.startswith("../run-fast/g3.json: the record was altered") for p in problems), \
        problems
    env = {**os.environ, "KVGATE_KEY_DIR": str(reports / "no-keys")}
    done = subprocess.run([sys.executable, "-m", "gates.cli", "verify", str(folder)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1 and "run-fast/g3.json: the record was altered" in done.stdout, \
        done.stdout + done.stderr


def test_verify_of_a_comparison_says_its_cited_records_are_unsigned(reports):
    folder = write_comparison(reports, _compare(reports), None)["json"].parent
    code, lines = examine(folder).judge(set(), given=False)
    unsigned = " ".join(text for label, text in lines if label == "UNSIGNED")
    assert code == 4 and "../run-fast/g3.json" in unsigned and "../run-slow/g1.json" in unsigned
