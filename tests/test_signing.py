"""Signed records (issue #15, item 3): `kvgate key`, signatures beside records, `verify --key`.

The chains here are written by the real write_reports and write_summary into a real store; the
forger edits files exactly as the issue describes (g3.json to PASS, record_sha256 and the
summary's hashes recomputed) and verify must name it, never say "intact".
"""

import hashlib
import io
import json
import os
import re
import stat
import tarfile
from pathlib import Path

import pytest
from _chain import PASSING, SITE, m, open_run

from gates.cli import main
from gates.core.configuration import ConfigError, SiteInfo
from gates.core.verdicts import GateRecord, Limit, UpstreamRef
from gates.report import (
    KEY_DIR_ENV,
    KEY_ENV,
    PRIVATE_NAME,
    PUBLIC_NAME,
    ReportContext,
    configured_signer,
    grouped,
    new_key,
    write_reports,
    write_summary,
)
from gates.report.sealing import RECORD_META, seal
from gates.report.signing import load_signer, sig_path
from gates.report.summary import summary_digest
from gates.report.verification import record_digest
from gates.store import MANIFEST, Store, write_bundle
from gates.store.bundle import manifest_text

FAILING_G3 = [m("g3.ttft_p50_reduction", 8, Limit.at_least(25, "%"), 8),
              m("g3.throughput_gain", 3, Limit.at_least(29, "%"), 8)]


@pytest.fixture(autouse=True)
def keys(tmp_path, monkeypatch):
    """This machine's key folder: empty, and no $KVGATE_SIGNING_KEY."""
    folder = tmp_path / "keys"
    monkeypatch.setenv(KEY_DIR_ENV, str(folder))
    monkeypatch.delenv(KEY_ENV, raising=False)
    return folder


@pytest.fixture
def performer(tmp_path):
    """The performer's key pair, outside this machine's key folder: (signer, .pub path)."""
    private, public, _ = new_key(tmp_path / "performer")
    return load_signer(private), public


def real_chain(out, signer, run_id="r1", g3=FAILING_G3):
    """G1 → G2 → G3 (G3 FAILS) and the summary, written by write_reports / write_summary."""
    with Store(out) as store:
        folder = open_run(store, run_id)
        (folder / "evidence").mkdir(exist_ok=True)
        cites = None
        for gate, measurements in (("g1", PASSING["g1"]), ("g2", PASSING["g2"]), ("g3", g3)):
            evidence = folder / "evidence" / f"{gate}-raw.json"
            evidence.write_text(json.dumps({"gate": gate}))
            store.add_evidence(run_id, evidence)
            upstream = cites and UpstreamRef(gate=cites[0].gate, run_id=run_id,
                                             verdict=cites[0].verdict, record_sha256=cites[1])
            record = GateRecord(gate=gate, run_id=run_id, site=SITE, started="t",
                                measurements=measurements, upstream=upstream or None,
                                evidence=store.manifest(run_id))
            cites = (record, store.save_record(record))
            write_reports(record, ReportContext(site=SiteInfo(name=SITE)), folder, signer=signer)
        write_summary(store, SITE, run_id, signer=signer)
    return folder


def verify(capsys, *argv):
    """(exit code, stdout) of `kvgate verify …`."""
    code = main(["verify", *map(str, argv)])
    return code, capsys.readouterr().out.replace("\n", " ")


def forge_g3_pass(folder):
    """The issue's forgery: g3.json edited to PASS, its record_sha256 and the summary rehashed."""
    body = json.loads((folder / "g3.json").read_text())
    assert body["verdict"] == "FAIL"
    body["verdict"] = "PASS"
    for item in body["measurements"]:
        item["outcome"] = "PASS"
    body["record_sha256"] = record_digest(body)
    (folder / "g3.json").write_text(json.dumps(body, indent=2))
    summary = json.loads((folder / "summary.json").read_text())
    link = next(c for c in summary["chain"] if c["gate"] == "g3")
    old = link["record_sha256"]
    link["verdict"], link["record_sha256"] = "PASS", body["record_sha256"]
    summary["summary_sha256"] = summary_digest(summary)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2))
    return old, body["record_sha256"]


# ---- the forged chain ----------------------------------------------------------------------

def test_the_forged_chain_of_the_issue_is_named(tmp_path, capsys, performer):
    signer, public = performer
    folder = real_chain(tmp_path / "reports", signer)
    assert verify(capsys, "--key", public, folder)[0] == 0
    shown, forged = forge_g3_pass(folder)
    assert "Verdict: FAIL" in (folder / "g3.html").read_text()
    code, out = verify(capsys, "--key", public, folder)
    assert code == 1 and "intact" not in out
    assert f"g3.json: signature invalid: g3.json.sig signs record {shown[:16]}…, the JSON is " \
        f"{forged[:16]}…" in out
    assert f"g3.json does not match g3.html: report shows record {shown[:16]}…, JSON is " \
        f"{forged[:16]}…" in out
    assert "summary.json: signature invalid: summary.json.sig signs record" in out
    assert "summary.json does not match summary.html" in out


def test_without_signatures_the_forgery_is_still_named_by_its_report(tmp_path, capsys):
    folder = real_chain(tmp_path / "reports", None)
    assert not list(folder.glob("*.sig"))
    shown, forged = forge_g3_pass(folder)
    code, out = verify(capsys, folder)
    assert code == 1 and "intact" not in out
    assert f"g3.json does not match g3.html: report shows record {shown[:16]}…" in out


def test_a_forger_who_resigns_everything_is_an_unknown_signer(tmp_path, capsys, performer):
    _, public = performer
    forger = load_signer(new_key(tmp_path / "forger")[0])
    folder = real_chain(tmp_path / "reports", forger, g3=PASSING["g3"])  # a whole new chain
    code, out = verify(capsys, "--key", public, folder)
    assert code == 4 and "intact" not in out
    assert f"UNKNOWN SIGNER g1.json, g2.json, g3.json, summary.json: signed by " \
        f"{grouped(forger.public.fingerprint)}, not by the key given with --key" in out


# ---- unsigned, wrong key, right key --------------------------------------------------------

def test_an_unsigned_chain_has_its_own_exit_code(tmp_path, capsys):
    folder = real_chain(tmp_path / "reports", None)
    code, out = verify(capsys, folder)
    assert code == 4 and "intact" not in out
    assert "UNSIGNED g1.json, g2.json, g3.json, summary.json: no signature (.sig)" in out
    assert "unsigned" in (folder / "g3.html").read_text()


def test_a_wrong_key_is_not_intact_by_that_key(tmp_path, capsys, performer):
    signer, _ = performer
    other = new_key(tmp_path / "other")[1]
    folder = real_chain(tmp_path / "reports", signer)
    code, out = verify(capsys, "--key", other, folder)
    assert code == 4 and "intact" not in out
    assert f"signed by {grouped(signer.public.fingerprint)}, not by the key given" in out


def test_a_signed_chain_verifies_by_key_file_fingerprint_or_own_key(tmp_path, capsys, keys,
                                                                     performer):
    signer, public = performer
    folder = real_chain(tmp_path / "reports", signer)
    fp = grouped(signer.public.fingerprint)
    code, out = verify(capsys, "--key", public, folder)
    assert code == 0 and f"signed by {fp}, intact: g1.json, g2.json, g3.json" in out
    assert verify(capsys, "--key", fp, folder / "g3.json")[0] == 0
    (tmp_path / "from-report.txt").write_text(signer.public.text + "\n")  # as reports print it
    assert verify(capsys, "--key", tmp_path / "from-report.txt", folder)[0] == 0
    assert verify(capsys, folder)[0] == 4  # not this machine's key, and not trusted here
    (keys / "trusted").mkdir(parents=True)
    (keys / "trusted" / "performer.pub").write_bytes(public.read_bytes())
    assert verify(capsys, folder)[0] == 0


def test_a_bad_key_argument_is_bad_input(tmp_path, capsys):
    folder = real_chain(tmp_path / "reports", None)
    assert main(["verify", "--key", "not-a-key", str(folder)]) == 2
    assert "neither a public key file nor a 64-digit fingerprint" in capsys.readouterr().err


def test_a_removed_record_leaves_its_signature_named(tmp_path, capsys, performer):
    signer, public = performer
    folder = real_chain(tmp_path / "reports", signer)
    (folder / "g3.json").unlink()
    code, out = verify(capsys, "--key", public, folder)
    assert code == 1 and "g3.json.sig: a signature without g3.json beside it" in out


def test_an_edited_report_breaks_its_signature(tmp_path, capsys, performer):
    signer, public = performer
    folder = real_chain(tmp_path / "reports", signer)
    html = (folder / "g3.html").read_text().replace("Verdict: FAIL", "Verdict: PASS")
    (folder / "g3.html").write_text(seal(html)[0])  # resealed: the unkeyed hash holds
    (folder / "g3.html.seal").unlink()
    code, out = verify(capsys, "--key", public, folder)
    assert code == 1 and "g3.html: signature invalid: g3.json.sig signs report" in out


# ---- bundles --------------------------------------------------------------------------------

def repack(src, dest, change):
    """A copy of a bundle with change(name, data) applied and its manifest recomputed."""
    with tarfile.open(src) as tar:
        files = {i.name: tar.extractfile(i).read() for i in tar.getmembers() if i.isfile()}
    files = {n: d for n, d in ((n, change(n, d)) for n, d in files.items()) if d is not None}
    files[MANIFEST] = manifest_text({n: hashlib.sha256(d).hexdigest()
                                     for n, d in files.items() if n != MANIFEST}).encode()
    with tarfile.open(dest, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return dest


def test_bundle_verification_covers_signatures(tmp_path, capsys, performer):
    signer, public = performer
    folder = real_chain(tmp_path / "reports", signer)
    bundle = write_bundle(folder.parent, "r1")
    code, out = verify(capsys, "--key", public, bundle)
    assert code == 0 and f"signed by {grouped(signer.public.fingerprint)}, intact" in out
    with tarfile.open(bundle) as tar:
        assert "r1/g3.json.sig" in tar.getnames()
    unsigned = repack(bundle, tmp_path / "unsigned.tar.gz",
                      lambda n, d: None if n.endswith(".sig") else d)
    code, out = verify(capsys, "--key", public, unsigned)
    assert code == 4 and "UNSIGNED r1/g1.json, r1/g2.json, r1/g3.json, r1/summary.json" in out
    bad = repack(bundle, tmp_path / "bad.tar.gz", lambda n, d: d.replace(
        b'"signature": "', b'"signature": "AAAA') if n == "r1/g2.json.sig" else d)
    code, out = verify(capsys, "--key", public, bad)
    assert code == 1 and "r1/g2.json.sig: " in out and "intact" not in out


# ---- what reports and the summary show ------------------------------------------------------

def test_reports_and_summary_name_the_record_and_the_signer(tmp_path, performer):
    signer, _ = performer
    folder = real_chain(tmp_path / "reports", signer)
    body = json.loads((folder / "g2.json").read_text())
    html = (folder / "g2.html").read_text()
    assert f'<meta name="{RECORD_META}" content="{body["record_sha256"]}">' in html
    fp = grouped(signer.public.fingerprint)
    assert f"digitally signed: ed25519 {fp}" in html and signer.public.text in html
    sig = json.loads(sig_path(folder / "g2.json").read_text())
    assert sig["statement"]["sha256"] == body["record_sha256"]
    assert sig["statement"]["report_sha256"] == (folder / "g2.html.seal").read_text().split()[0]
    assert sig["fingerprint"] == signer.public.fingerprint
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["signer"]["fingerprint"] == signer.public.fingerprint
    assert {c["signer"] for c in summary["chain"] if c["run_id"]} == {signer.public.fingerprint}
    page = (folder / "summary.html").read_text()
    assert f"Signed by ed25519 key <span class=\"mono\">{fp}</span>" in page
    assert page.count(f"signed by {fp}") == 3


def test_the_configured_key_signs_by_default(tmp_path, keys, capsys):
    assert main(["key", "new"]) == 0
    out = capsys.readouterr().out
    private, public = keys / PRIVATE_NAME, keys / PUBLIC_NAME
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    fp = grouped(load_signer(private).public.fingerprint)
    assert f"public key:  {public}" in out and f"fingerprint: {fp}" in out
    with Store(tmp_path / "reports") as store:
        open_run(store, "r1")
        write_summary(store, SITE, "r1")  # as the plugin calls it: no signer argument
    assert sig_path(tmp_path / "reports" / "r1" / "summary.json").is_file()
    assert main(["key", "show"]) == 0 and f"fingerprint: {fp}" in capsys.readouterr().out


# ---- kvgate key -----------------------------------------------------------------------------

def test_key_new_never_overwrites_and_show_needs_a_key(tmp_path, capsys):
    assert main(["key", "show"]) == 2
    assert "no signing key" in capsys.readouterr().err
    assert main(["key", "new", "--out", str(tmp_path / "k")]) == 0
    first = (tmp_path / "k" / PRIVATE_NAME).read_bytes()
    assert f"export {KEY_ENV}=" in capsys.readouterr().out
    assert main(["key", "new", "--out", str(tmp_path / "k")]) == 2
    assert "already exists; kvgate never overwrites a key" in capsys.readouterr().err
    assert (tmp_path / "k" / PRIVATE_NAME).read_bytes() == first


def test_the_signing_key_variable_must_name_a_usable_private_key(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "absent.pem"))
    with pytest.raises(ConfigError, match="signing key unreadable"):
        configured_signer()
    private = new_key(tmp_path / "k")[0]
    os.chmod(private, 0o644)
    monkeypatch.setenv(KEY_ENV, str(private))
    with pytest.raises(ConfigError, match="chmod 600"):
        configured_signer()
    os.chmod(private, 0o600)
    assert configured_signer().path == private


def test_a_signing_key_that_is_no_regular_file_is_refused_before_it_is_read(tmp_path,
                                                                           monkeypatch):
    """A FIFO would block the run forever, /dev/zero would never end: checked, not read."""
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo, 0o600)
    huge = tmp_path / "huge.pem"
    huge.write_bytes(b"x" * (64 * 1024 + 1))
    os.chmod(huge, 0o600)
    for path, said in ((fifo, "is not a regular file (a FIFO, device or directory)"),
                       (Path("/dev/zero"), "is not a regular file"),
                       (tmp_path, "is not a regular file"),
                       (huge, "is 65,537 bytes, not a key (at most 65,536)")):
        monkeypatch.setenv(KEY_ENV, str(path))
        with pytest.raises(ConfigError, match=re.escape(said)) as refused:
            configured_signer()
        assert str(path) in str(refused.value)


def test_help_documents_keys_and_exit_codes(capsys):
    for argv in (["verify", "--help"], ["key", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out.replace("\n", " ")
        assert "examples:" in out
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "0 intact and signed by the given" in text and "4 intact but unsigned" in text
