"""Issue #17, "Nothing silent": `kvgate verify RUN` on a run folder names what is gone or added.

Before the fix the folder check trusted whatever it found: with g1.html deleted (unsigned run),
or summary.html and g1.html.seal deleted, or a file added at the folder's top level, it still
said intact (only a bundle's MANIFEST caught those). The runs here are written the way `kvgate
run` writes them: a real GateSession records a G1 measurement and finishes the gate
(g1.json, g1.html, g1.html.seal, g1.json.sig when signed), then write_summary; no fio.
"""

import pytest

from gates.cli import main
from gates.core.verdicts import Limit, Measurement
from gates.options import RunOptions
from gates.report import KEY_DIR_ENV, KEY_ENV, new_key, write_summary
from gates.report.verification import verify
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
def run_folder(tmp_path, repo, monkeypatch):
    """make(signed) -> the folder of a finished G1 run with its summary, as kvgate leaves it."""
    def make(signed: bool):
        if signed:
            monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
            monkeypatch.delenv(KEY_ENV, raising=False)
            new_key(tmp_path / "keys")
        (tmp_path / "site.toml").write_text(SITE.format(target=tmp_path / "target"))
        session = GateSession.open(RunOptions(site=tmp_path / "site.toml",
                                              thresholds=repo / "thresholds.toml",
                                              out=tmp_path / "reports", run_id="r1"))
        evidence = session.evidence_dir / "fio-seqread.json"
        evidence.write_text('{"jobs": []}')
        session.add_evidence(evidence)
        session.record("g1", Measurement.measured("Sequential read", 5.0,
                                                  Limit.at_least(4, "GB/s")))
        session.finish()
        write_summary(session.store, session.site.site.name, "r1")
        session.store.close()
        folder = tmp_path / "reports" / "r1"
        names = {"g1.json", "g1.html", "g1.html.seal", "summary.json", "summary.html"}
        assert names | ({"g1.json.sig", "summary.json.sig"} if signed else set()) == {
            p.name for p in folder.iterdir() if p.is_file()}
        return folder
    return make


def lines(capsys):
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("signed", [False, True])
def test_a_deleted_gate_report_is_named_once(run_folder, capsys, signed):
    folder = run_folder(signed)
    assert main(["verify", str(folder)]) == (0 if signed else 4)
    capsys.readouterr()
    (folder / "g1.html").unlink()
    assert main(["verify", str(folder)]) == 1
    out = lines(capsys)
    assert "ALTERED g1.html: missing (the report of g1.json)" in out
    assert sum(line.startswith("ALTERED g1.html:") for line in out) == 1, out
    assert not any("intact" in line for line in out)
    assert main(["verify", str(folder / "g1.json")]) == 1  # one gate JSON: its report too
    assert "ALTERED g1.html: missing (the report of g1.json)" in lines(capsys)


def test_a_deleted_summary_report_and_seal_file_are_both_named(run_folder, capsys):
    folder = run_folder(signed=True)
    (folder / "summary.html").unlink()
    (folder / "g1.html.seal").unlink()
    assert main(["verify", str(folder)]) == 1
    out = [line for line in lines(capsys) if line.startswith("ALTERED")]
    assert out == ["ALTERED g1.html.seal: missing (the seal file of g1.html, written with "
                   "g1.json)",
                   "ALTERED summary.html: missing (the report of summary.json)"]


def test_unlisted_files_at_the_top_level_and_in_evidence_are_named(run_folder, capsys):
    folder = run_folder(signed=True)
    (folder / "notes.txt").write_text("added later")
    (folder / "extra").mkdir()
    (folder / "extra" / "deep.log").write_text("added later")
    (folder / "evidence" / "planted.log").write_text("added later")
    assert main(["verify", str(folder)]) == 1
    out = lines(capsys)
    said = "unlisted (in the run folder, but not a record, report, seal file, signature or " \
           "evidence file kvgate writes there)"
    assert f"ALTERED notes.txt: {said}" in out
    assert f"ALTERED extra/deep.log: {said}" in out
    assert "ALTERED evidence/planted.log: unlisted (in the evidence folder, but no record's " \
           "manifest lists it)" in out


def test_a_report_or_seal_file_without_its_record_is_named(run_folder, capsys):
    folder = run_folder(signed=False)
    (folder / "g1.html.seal").rename(folder / "g2.html.seal")
    (folder / "g3.html").write_text((folder / "g1.html").read_text())
    assert main(["verify", str(folder)]) == 1
    out = lines(capsys)
    assert "ALTERED g2.html.seal: a seal file without g2.json beside it (its record was " \
           "removed, or it was added)" in out
    assert "ALTERED g3.html: a report without g3.json beside it (its record was removed, or " \
           "it was added)" in out
    assert "ALTERED g1.html.seal: missing (the seal file of g1.html, written with g1.json)" in out


def test_an_untouched_run_folder_and_its_files_verify_as_before(run_folder):
    folder = run_folder(signed=True)
    files, problems = verify(folder)
    assert problems == [] and files == ["g1.json", "g1.html", "summary.html", "summary.json"]
