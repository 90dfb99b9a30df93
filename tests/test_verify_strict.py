"""Issue #25 item 11: `kvgate verify` said "intact" for three files a reader is misled by.

A signed G1 run folder as `kvgate run` leaves it (a real session, reports and summary, signed
with this test's key), then: the record's decision rule rewritten (it sat outside the signed
content); a second "verdict" key put in front of the real one (a first-wins reader sees PASS,
Python's parser the last); summary.json, its signature and its report deleted (the NOT READY
recommendation gone). Each must be named, never "intact".
"""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.cli import main
from gates.core.verdicts import Limit, Measurement
from gates.options import RunOptions
from gates.report import KEY_DIR_ENV, KEY_ENV, new_key, write_summary
from gates.report.signing import strict_json
from gates.session import GateSession

SITE = """
[site]
name = "verify site"
[target]
directory = "{target}"
create = true
min_free = "0"
[fio]
file_size = "16MiB"
"""


@pytest.fixture
def folder(tmp_path, repo, monkeypatch):
    """A finished, signed G1 run folder with its summary; verify calls it intact."""
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.delenv(KEY_ENV, raising=False)
    new_key(tmp_path / "keys")
    (tmp_path / "site.toml").write_text(SITE.format(target=tmp_path / "target"))
    session = GateSession.open(RunOptions(site=tmp_path / "site.toml",
                                          thresholds=repo / "thresholds.toml",
                                          out=tmp_path / "reports", run_id="r1"))
    session.record("g1", Measurement.measured("Sequential read", 3.0, Limit.at_least(4, "GB/s")))
    session.finish()
    write_summary(session.store, session.site.site.name, "r1")
    session.store.close()
    run = tmp_path / "reports" / "r1"
    assert main(["verify", str(run)]) == 0
    return run


def altered(capsys, run) -> list[str]:
    capsys.readouterr()
    assert main(["verify", str(run)]) == 1
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("ALTERED")]


def test_a_rewritten_decision_rule_is_named(folder, capsys):
    record = folder / "g1.json"
    body = json.loads(record.read_text())
    assert body["verdict"] == "FAIL" and "any FAIL makes it FAIL" in body["decision_rule"]
    body["decision_rule"] = "The gate PASSES whatever its measurements say."
    record.write_text(json.dumps(body, indent=2) + "\n")
    signed = json.loads((folder / "g1.json.sig").read_text())["statement"]
    assert altered(capsys, folder) == [
        "ALTERED g1.json: signature invalid: the decision rule was altered (it no longer hashes "
        f"to the {signed['decision_rule_sha256'][:16]}… that was signed)"]


def test_a_duplicated_verdict_key_is_refused_naming_the_key(folder, capsys):
    record = folder / "g1.json"
    text = record.read_text()
    assert json.loads(text)["verdict"] == "FAIL"
    record.write_text(text.replace("{", '{\n  "verdict": "PASS",', 1))  # first of two
    out = altered(capsys, folder)
    assert "ALTERED g1.json: refused: the key 'verdict' appears twice in one object (readers " \
           "differ on which value counts)" in out
    assert not any("intact" in line for line in out)


def test_a_deleted_summary_and_its_signature_are_named(folder, capsys):
    for name in ("summary.json", "summary.json.sig", "summary.html"):
        (folder / name).unlink()
    assert altered(capsys, folder) == [
        "ALTERED summary.json: missing (a run folder with gate records holds their procurement "
        "summary, summary.json and summary.html: deleted, its recommendation is gone with it)"]


def test_one_gate_json_on_its_own_needs_no_summary(folder):
    (folder / "summary.json").unlink()
    assert main(["verify", str(folder / "g1.json")]) == 0


# ---- the strict reader, for anything a tool or a person hands to verify -----------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


@given(body=st.dictionaries(st.text(max_size=4), JSON, max_size=4), key=st.text(max_size=4),
       first=JSON, last=JSON, depth=st.integers(0, 2))
def test_an_object_naming_a_key_twice_is_refused_at_any_depth(body, key, first, last, depth):
    assert strict_json(json.dumps(body)) == body  # without duplicates: what json.loads reads
    inner = json.dumps({k: v for k, v in body.items() if k != key})
    doubled = "{" + f"{json.dumps(key)}: {json.dumps(first)}, {json.dumps(key)}: " \
        f"{json.dumps(last)}" + ("" if inner == "{}" else ", " + inner[1:-1]) + "}"
    for _ in range(depth):
        doubled = '{"outer": [' + doubled + "]}"
    with pytest.raises(ValueError, match=re.escape(f"the key {key!r} appears twice")):
        strict_json(doubled)
