"""`kvgate verify`: tampering with one byte of evidence, a verdict, or the chain is named.

Signatures, signers and the report-record binding have their own tests in test_signing.py;
here an intact chain is signed by this machine's key, so verify calls it intact (exit 0), and
an unsigned one is intact but unsigned (exit 4).
"""

import hashlib
import json
import shutil
import tarfile

import pytest
from _chain import SITE, full_chain, write_report

from gates.cli import main
from gates.core.verdicts import GateRecord, Limit, Measurement, Outcome, UpstreamRef
from gates.report import KEY_DIR_ENV, KEY_ENV, PRIVATE_NAME, new_key, write_summary
from gates.report.sealing import content_hash
from gates.report.signing import load_signer, statement, write_signature
from gates.report.verification import record_digest, verify
from gates.store import Store, write_bundle


@pytest.fixture(autouse=True)
def signer(tmp_path, monkeypatch):
    """This machine's own key, in a key folder of the test's own: what verify trusts."""
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.delenv(KEY_ENV, raising=False)
    new_key(tmp_path / "keys")
    return load_signer(tmp_path / "keys" / PRIVATE_NAME)


def sign_records(folder, signer):
    """Sign each gate JSON of a run folder (its report and decision rule) as write_reports would."""
    for path in sorted(folder.glob("g[1-4].json")):
        html, body = path.with_suffix(".html"), json.loads(path.read_text())
        write_signature(path, signer, statement(path.name, record_digest(body), html.name,
                                                content_hash(html.read_text()),
                                                decision_rule=body["decision_rule"]))


def write_run(root, run_id, gate, upstream=None, value=12.0):
    """A run folder as kvgate writes it: evidence, the record JSON with its hash, its report."""
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
    write_report(folder, gate, record.title)
    return folder, record


def test_an_intact_unsigned_run_is_not_called_intact(tmp_path, capsys):
    folder = sealed_run(tmp_path, signed=False)  # its records unsigned (the summary is signed)
    assert main(["verify", str(folder)]) == 4
    out = capsys.readouterr().out
    assert "UNSIGNED g1.json, g2.json, g3.json, g4.json: no signature (.sig)" in out
    assert "intact" not in out


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


def test_a_renamed_upstream_run_folder_is_named_with_what_to_do(tmp_path, capsys):
    # #27: "cites g1 of run r1, which is not here" alone left the reader guessing.
    _, g1 = write_run(tmp_path, "r1", "g1")
    cited = UpstreamRef(gate="g1", run_id="r1", verdict=Outcome.PASS, record_sha256=g1.sha256())
    folder, _ = write_run(tmp_path, "r2", "g2", upstream=cited)
    (tmp_path / "r1").rename(tmp_path / "site-a-g1")
    assert main(["verify", str(folder)]) == 1
    out = capsys.readouterr().out.replace("\n", " ")
    assert "g2.json: cites g1 of run r1, which is not here (folder site-a-g1/ holds run r1's g1 " \
           "record under another name: a run is found by its id, so rename the folder back " \
           "to r1)" in out, out
    shutil.rmtree(tmp_path / "site-a-g1")
    assert main(["verify", str(folder)]) == 1
    assert "which is not here (no folder r1/ beside this run: verify the bundle" in \
        capsys.readouterr().out.replace("\n", " ")


def test_a_folder_kvgate_wrote_nothing_into_is_bad_input_not_altered(tmp_path, capsys):
    # #27: it was ALTERED (exit 1), as if someone had changed files.
    assert main(["verify", str(tmp_path)]) == 2
    both = capsys.readouterr()
    assert "ALTERED" not in both.out
    assert f"{tmp_path}: no gate record, report or summary here, so it is no run folder: give " \
           "a run folder (reports/<run-id>), one gate JSON, a bundle (.bundle.tar.gz), a " \
           "comparison's folder (reports/compare-…) or a sweep's (reports/sweep-…)" in \
           both.err.replace("\n", " ")


def test_the_folder_of_a_run_killed_before_any_record_is_bad_input(tmp_path, capsys):
    out = tmp_path / "reports"
    with Store(out) as store:
        folder = store.begin_run("killed", SITE)
    (folder / "evidence" / "engine.log").write_text("killed mid-run\n")
    assert main(["verify", str(folder)]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "a run stopped before its first gate finished (killed?), or one still running, " \
           "leaves only evidence/ behind: there is nothing to verify" in err
    assert main(["verify", str(out)]) == 2  # the reports folder itself
    assert "it is the reports folder (it holds the store): give one run's folder" in \
        capsys.readouterr().err.replace("\n", " ")


def test_an_extracted_bundle_without_its_manifest_is_bad_input_and_says_so(tmp_path, capsys):
    folder = sealed_run(tmp_path)
    bundle = write_bundle(folder.parent, "r1")
    with tarfile.open(bundle) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    (tmp_path / "x" / "MANIFEST.sha256").unlink()
    assert main(["verify", str(tmp_path / "x")]) == 2
    assert "it holds run folders, but no MANIFEST.sha256" in \
        capsys.readouterr().err.replace("\n", " ")


def test_a_run_folder_whose_records_were_deleted_is_still_altered(tmp_path, capsys):
    folder = sealed_run(tmp_path)
    for path in folder.glob("g[1-4].json"):
        path.unlink()
    assert main(["verify", str(folder)]) == 1
    assert "no gate record (g1.json … g4.json) here" in capsys.readouterr().out


def test_schema_describes_every_key_of_a_written_record(tmp_path, capsys):
    folder, _ = write_run(tmp_path, "r1", "g1")
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    body = json.loads((folder / "g1.json").read_text())
    assert set(body) <= set(schema["properties"])
    assert set(schema["required"]) <= set(body)
    assert schema["$id"].startswith("urn:kvgate:gate-record:")


# ---- seals, the summary, unlisted evidence, extracted bundles -------------------------------

def sealed_run(tmp_path, signed=True):
    """A real store with a G1→G4 chain in one run, sealed reports and the summary, signed."""
    out = tmp_path / "reports"
    with Store(out) as store:
        full_chain(store, "r1")
        write_summary(store, SITE, "r1")  # signed by the configured key: this machine's
    if signed:
        sign_records(out / "r1", load_signer(tmp_path / "keys" / PRIVATE_NAME))
    return out / "r1"


def test_a_sealed_run_with_its_summary_verifies(tmp_path, capsys):
    folder = sealed_run(tmp_path)
    assert main(["verify", str(folder)]) == 0
    out = capsys.readouterr().out
    assert ", intact: g1.json, g2.json, g3.json, g4.json, g1.html" in out
    assert "summary.html, summary.json" in out


def test_one_altered_report_byte_is_named(tmp_path, capsys):
    folder = sealed_run(tmp_path)
    path = folder / "g3.html"
    path.write_text(path.read_text().replace("G3 main gate", "G3 main gale"))
    assert main(["verify", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "g3.html: the report was altered" in out
    assert out.count("ALTERED") == 1


def test_a_report_without_a_seal_is_named(tmp_path, capsys):
    folder = sealed_run(tmp_path)
    (folder / "g2.html").write_text("<html><body>no seal</body></html>")
    assert main(["verify", str(folder / "g2.json")]) == 1
    assert "g2.html: expected one report-sha256 field in the report, found 0" in \
        capsys.readouterr().out


def test_an_edited_summary_is_named(tmp_path, capsys):
    folder = sealed_run(tmp_path)
    body = json.loads((folder / "summary.json").read_text())
    body["chain"][0]["verdict"] = "FAIL"
    (folder / "summary.json").write_text(json.dumps(body))
    html = folder / "summary.html"
    text = html.read_text()
    assert ">ACCEPT<" in text
    html.write_text(text.replace(">ACCEPT<", ">OK<", 1))
    assert main(["verify", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "summary.json: the summary was altered" in out
    assert "summary.html: the report was altered" in out


def test_a_summary_citing_another_record_is_named(tmp_path, capsys):
    folder = sealed_run(tmp_path)
    record = json.loads((folder / "g4.json").read_text())
    record["record_sha256"] = "f" * 64  # g4.json now says another hash than the summary cites
    (folder / "g4.json").write_text(json.dumps(record))
    assert main(["verify", str(folder)]) == 1
    assert "summary.json: the g4 record it stands on (r1) is not the one it cited" in \
        capsys.readouterr().out


def test_an_evidence_file_no_record_lists_is_named(tmp_path, capsys):
    folder, _ = write_run(tmp_path, "r1", "g1")
    (folder / "evidence" / "planted.log").write_text("added later")
    assert main(["verify", str(folder)]) == 1
    assert "evidence/planted.log: unlisted (in the evidence folder, but no record's manifest" \
        in capsys.readouterr().out


def test_an_extracted_bundle_folder_verifies_like_the_archive(tmp_path):
    folder = sealed_run(tmp_path)
    bundle = write_bundle(folder.parent, "r1")
    with tarfile.open(bundle) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    assert verify(tmp_path / "x") == verify(bundle)
    assert verify(bundle)[1] == []
    (tmp_path / "x" / "r1" / "evidence" / "g1-raw.json").write_text("{}")
    assert verify(tmp_path / "x")[1][0].startswith("r1/evidence/g1-raw.json: altered")


def test_a_path_that_does_not_exist_is_bad_input(tmp_path, capsys):
    # #27: a mistyped path was ALTERED (exit 1).
    assert main(["verify", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such file or folder: give a run folder" in \
        capsys.readouterr().err.replace("\n", " ")
    (tmp_path / "notes.txt").write_text("not kvgate's")
    assert main(["verify", str(tmp_path / "notes.txt")]) == 2
    assert "notes.txt: neither a gate JSON nor a bundle" in capsys.readouterr().err


def test_a_seal_file_that_disagrees_with_its_report_is_named(tmp_path, capsys):
    folder = sealed_run(tmp_path)
    html = (folder / "g1.html").read_text()
    seal_now = html.split('id="report-sha256">')[1][:64]
    (folder / "g1.html.seal").write_text(f"{seal_now}  g1.html\n")
    assert main(["verify", str(folder)]) == 0
    (folder / "g1.html.seal").write_text(f"{'0' * 64}  g1.html\n")
    assert main(["verify", str(folder)]) == 1
    assert "g1.html.seal: names seal 0000000000000000…, not the one inside g1.html" in \
        capsys.readouterr().out
