"""`kvgate verify`: tampering with one byte of evidence, a verdict, or the chain is named."""

import hashlib
import json

from gates._record import GateRecord, UpstreamRef
from gates._verdict import Limit, Measurement, Outcome
from gates.cli import main


def write_run(root, run_id, gate, upstream=None, value=12.0):
    """A run folder as kvgate writes it: evidence, and the record JSON with its hash."""
    folder = root / run_id
    (folder / "evidence").mkdir(parents=True)
    evidence = folder / "evidence" / "fio-seqread.json"
    evidence.write_text('{"jobs": []}')
    record = GateRecord(gate=gate, run_id=run_id, site="s", started="t", upstream=upstream,
                        evidence={"evidence/fio-seqread.json":
                                  hashlib.sha256(evidence.read_bytes()).hexdigest()},
                        measurements=[Measurement.measured("bw", value, Limit.at_least(10))])
    body = json.loads(record.canonical_json())
    body |= {"decision_rule": "…", "record_sha256": record.sha256()}
    (folder / f"{gate}.json").write_text(json.dumps(body, indent=2))
    return folder, record


def test_an_intact_run_verifies(tmp_path, capsys):
    folder, _ = write_run(tmp_path, "r1", "g1")
    assert main(["verify", str(folder)]) == 0
    assert "intact: g1.json" in capsys.readouterr().out


def test_one_altered_evidence_byte_is_named(tmp_path, capsys):
    folder, _ = write_run(tmp_path, "r1", "g1")
    path = folder / "evidence" / "fio-seqread.json"
    path.write_bytes(path.read_bytes().replace(b"[]", b"[1]"))
    assert main(["verify", str(folder)]) == 1
    assert "evidence/fio-seqread.json: altered" in capsys.readouterr().out


def test_an_edited_verdict_is_caught(tmp_path, capsys):
    folder, _ = write_run(tmp_path, "r1", "g1", value=3.0)
    body = json.loads((folder / "g1.json").read_text())
    assert body["verdict"] == "FAIL"
    body["verdict"] = "PASS"
    body["measurements"][0]["outcome"] = Outcome.PASS.value
    (folder / "g1.json").write_text(json.dumps(body, indent=2))
    assert main(["verify", str(folder / "g1.json")]) == 1
    assert "g1.json: the record was altered" in capsys.readouterr().out


def test_a_missing_evidence_file_and_a_broken_chain_are_named(tmp_path, capsys):
    _, g1 = write_run(tmp_path, "r1", "g1")
    cited = UpstreamRef(gate="g1", run_id="r1", verdict=Outcome.PASS, record_sha256="0" * 64)
    folder, _ = write_run(tmp_path, "r2", "g2", upstream=cited)
    (folder / "evidence" / "fio-seqread.json").unlink()
    assert main(["verify", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "evidence/fio-seqread.json: missing" in out
    assert "the g1 record it stands on (r1) is not the one it cited" in out


def test_a_folder_without_records_is_an_error(tmp_path, capsys):
    assert main(["verify", str(tmp_path)]) == 1
    assert "no gate record" in capsys.readouterr().out


def test_schema_describes_every_key_of_a_written_record(tmp_path, capsys):
    folder, _ = write_run(tmp_path, "r1", "g1")
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    body = json.loads((folder / "g1.json").read_text())
    assert set(body) <= set(schema["properties"])
    assert set(schema["required"]) <= set(body)
    assert schema["$id"].startswith("urn:kvgate:gate-record:")
