"""Golden tests on the JSON gate record: schema-valid, stable field names, byte-stable output.

The record's field names are a published interface (buyers' tools read <gate>.json). When a
field is added, renamed or removed on purpose, regenerate the golden files and review the diff:

    KVGATE_REGEN_GOLDEN=1 python -m pytest -q tests/test_record_golden.py
    git diff tests/data/golden/
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from gates.cli import record_schema
from gates.core.verdicts import (
    Cause,
    ChecklistAnswer,
    Deviation,
    DutItem,
    GateRecord,
    Limit,
    Measurement,
    Outcome,
    Table,
    UpstreamRef,
)
from gates.core.verdicts.verdict import Covered
from gates.options import RunOptions
from gates.report import write_reports
from gates.session import GateSession

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
REGEN = os.environ.get("KVGATE_REGEN_GOLDEN") == "1"

SITE = """
[site]
name = "Golden site"
customer = "Acme Inference GmbH"

[target]
directory = "target"
create = true

[fio]
file_size = "1GiB"
"""
# The decision rule's inputs, pinned here so the golden text does not follow thresholds.toml.
DECISION = {"statistic": '"lower_confidence_bound"', "confidence": "0.95",
            "marginal_band": '"5 %"'}
SHA = "0123456789abcdef" * 4


def g3_measurements() -> list[Measurement]:
    """Every shape of measurement: each outcome, intervals, relative and two-sided limits."""
    pct = "%"
    return [
        Measurement.measured("TTFT p50 reduction vs G2 baseline", 31.4,
                             Limit.at_least(25, pct, key="g3.ttft_p50_reduction_min",
                                            relative_to="G2 TTFT p50", marginal=0.05),
                             interval=(28.2, 34.9), evidence=["evidence/g3-candidate.jsonl"],
                             note="G2 run 2026-11-29T080000Z, p50 1.92 s → 1.32 s"
                             ).model_copy(update={"id": "g3.ttft_p50_reduction", "at": 8,
                                                  "interval_miss": 0.0223,
                                                  "coverage": Covered(what="pairs", expected=8,
                                                                      read=8)}),
        Measurement.measured("Output throughput gain vs G2 baseline", 26.0,
                             Limit.at_least(29, pct, key="g3.throughput_gain_min"),
                             # wholly below the limit: a FAIL (one reaching back past 29
                             # would be MARGINAL, Limit.judge)
                             interval=(22.5, 28.4)),
        Measurement.measured("Throughput gain within the claimed band", 26.0,
                             Limit(lo=0, hi=40, hi_inclusive=False, unit=pct,
                                   key="g3.throughput_gain_claimed_max", marginal=0.05)),
        Measurement.measured("Storage reads cover the expected KV bytes", 91.0,
                             Limit.at_least(90, pct, key="g3.storage_read_fraction_min",
                                            marginal=0.05)),
        Measurement.error("Greedy output matches the recompute arm",
                          "recompute arm did not answer: connection refused",
                          Limit.at_most(0, "tokens", key="g3.correctness_tokens")),
        Measurement.not_applicable("Workload hash equals G2's", "G2 ran without a workload file"),
    ]


def g3_record() -> GateRecord:
    """A G3 record with every field set, and nothing taken from the clock or the machine."""
    return GateRecord(
        gate="g3", run_id="2026-11-30T091000Z", site="Golden site",
        started="2026-11-30T09:10:00Z", finished="2026-11-30T11:42:17Z",
        measurements=g3_measurements(), thresholds_revision="2026.11-1",
        thresholds_sha256=SHA, site_sha256=SHA[::-1], limits_profile="",
        tool_versions={"kvgate": "0.1.0", "kvgate commit": "1b895a7c0ffe",
                       "engine (candidate)": "vllm 0.11.0, LMCache 0.3.9", "python": "3.11.2"},
        upstream=UpstreamRef(gate="g2", run_id="2026-11-29T080000Z", verdict=Outcome.PASS,
                             record_sha256="89ab" * 16),
        forced=True, deviations=[Deviation(cause=Cause.FORCED, text="FORCED: run despite the "
                                           "upstream gate: G2 ran on a Sunday")],
        evidence={"evidence/g3-candidate.jsonl": SHA, "evidence/g3-arm-candidate.log": SHA},
        inventory=[DutItem(role="NVMe controller", name="nvme1", model="KIOXIA KCMYXRUG15T3",
                           serial="X3B0A017T0K8", firmware="1UET7104", detail="15.36 TB")],
        facts={"workload sha256": SHA, "pre-flight predicted TTFT reduction": "33.0 %"},
        checklist=[ChecklistAnswer(gate="g3", item_id="g3.engine-config-reviewed",
                                   text="Engine configuration reviewed", answer="pass",
                                   note="LMCache chunk 256", operator="Jana Novak",
                                   answered_at="2026-11-30T09:14:05Z")],
        tables={"Storage-read evidence chain @ concurrency 8": Table(
            columns=["signal", "kind", "value", "expected", "agrees?", "note"],
            rows=[["vllm:external_prefix_cache_hits_total", "engine counter", "8,192 tokens",
                   "≥ 7,373 of 8,192 expected tokens", "agrees", ""]])},
    )


@pytest.fixture
def session(tmp_path):
    """A real GateSession whose thresholds pin the decision rule's inputs."""
    (tmp_path / "site.toml").write_text(SITE)
    thresholds = (REPO / "thresholds.toml").read_text()
    for key, value in DECISION.items():
        pattern = rf'(?m)^{key}\s*=\s*("[^"]*"|\S+)'
        thresholds, found = re.subn(pattern, f"{key} = {value}", thresholds, count=1)
        assert found, f"thresholds.toml has no [decision] {key}"
    (tmp_path / "thresholds.toml").write_text(thresholds)
    opened = GateSession.open(RunOptions(site=tmp_path / "site.toml",
                                         thresholds=tmp_path / "thresholds.toml",
                                         out=tmp_path / "reports", run_id="2026-11-30T091000Z"))
    yield opened
    opened.store.close()


def written(record: GateRecord, session: GateSession) -> str:
    """The <gate>.json text exactly as write_reports puts it beside the report."""
    return write_reports(record, session.report_context(record),
                         session.store.run_dir(record.run_id))["json"].read_text()


def schema_errors(body: dict) -> list[str]:
    """Every way the body breaks `kvgate schema`, as "path: message" lines."""
    validator = Draft202012Validator(record_schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator.iter_errors(body)]


def field_names(body: dict) -> dict[str, list[str]]:
    """The field names of the record and of each nested object a reader walks into."""
    first = body["measurements"][0]
    return {"record": sorted(body), "measurement": sorted(first),
            "limit": sorted(first["limit"]), "upstream": sorted(body["upstream"]),
            "inventory": sorted(body["inventory"][0]),
            "checklist": sorted(body["checklist"][0]),
            "coverage": sorted(first["coverage"]), "deviation": sorted(body["deviations"][0])}


def matches_golden(name: str, text: str) -> None:
    """Assert text equals tests/data/golden/<name>, with a unified diff; regenerate on request."""
    path = GOLDEN / name
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    expected = path.read_text() if path.exists() else ""
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"golden/{name}", "written now"))
        pytest.fail(f"{name} changed: a published interface. If on purpose, regenerate with "
                    f"KVGATE_REGEN_GOLDEN=1 and review the diff:\n{diff}", pytrace=False)


def test_schema_is_a_valid_json_schema():
    meta = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    assert [e.message for e in meta.iter_errors(record_schema())] == []


def test_written_record_validates_against_the_schema(session):
    body = json.loads(written(g3_record(), session))
    assert schema_errors(body) == []
    assert body["verdict"] == "FAIL" and body["record_sha256"] == g3_record().sha256()


def test_a_sparse_record_validates_too(session):
    sparse = GateRecord(gate="g1", run_id=session.run_id, site="s", started="2026-11-30T09:10:00Z",
                        measurements=[Measurement.blocked("figure", "no G1 record")])
    body = json.loads(written(sparse, session))
    assert schema_errors(body) == [] and body["upstream"] is None


def test_schema_rejects_what_no_writer_produces(session):
    body = json.loads(written(g3_record(), session))
    broken = {**body, "measurements": [{**body["measurements"][0], "outcome": "MAYBE"}]}
    del broken["record_sha256"]
    errors = schema_errors(broken)
    assert any("record_sha256" in e for e in errors)
    assert any(e.startswith("measurements/0/outcome") for e in errors)


def test_kvgate_schema_prints_the_same_schema():
    done = subprocess.run([sys.executable, "-m", "gates.cli", "schema"], capture_output=True,
                          text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == record_schema()


def test_field_names_are_stable(session):
    names = field_names(json.loads(written(g3_record(), session)))
    matches_golden("record_fields.json", json.dumps(names, indent=2) + "\n")


def test_schema_names_the_same_fields(session):
    """The schema documents exactly the fields a record carries: no more, no fewer."""
    schema = record_schema()
    defs = schema["$defs"]
    names = field_names(json.loads(written(g3_record(), session)))
    documented = {"record": schema, "measurement": defs["Measurement"], "limit": defs["Limit"],
                  "upstream": defs["UpstreamRef"], "inventory": defs["DutItem"],
                  "checklist": defs["ChecklistAnswer"], "coverage": defs["Covered"],
                  "deviation": defs["Typed"]}
    assert {k: sorted(v["properties"]) for k, v in documented.items()} == names


def test_full_record_is_byte_for_byte_golden(session):
    matches_golden("g3_record.json", written(g3_record(), session))

