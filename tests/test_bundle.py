"""`kvgate bundle` and verifying bundles: real runs, real tar archives, tampering named."""

import argparse
import hashlib
import io
import shutil
import tarfile

import pytest
from _chain import SITE, add_gate, full_chain, open_run
from hypothesis import given
from hypothesis import strategies as st

from gates.commands import add_bundle_commands, bundle_command
from gates.report import write_summary
from gates.report.verification import verify
from gates.store import MANIFEST, BundleError, Store, parse_manifest, write_bundle
from gates.store.bundle import manifest_text


def parse(argv):
    parser = argparse.ArgumentParser(prog="kvgate")
    add_bundle_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


@pytest.fixture
def reports(tmp_path):
    """Run a (G1-G3) and run b (G4 on a's G3, with the summary): a checklist-style chain."""
    out = tmp_path / "reports"
    with Store(out) as store:
        below = full_chain(store, "a", gates=("g1", "g2", "g3"))
        write_summary(store, SITE, "a")  # every run that writes records writes its summary
        open_run(store, "b")
        add_gate(store, "b", "g4", cites=below["g3"])
        write_summary(store, SITE, "b")
        open_run(store, "lonely")
    return out


def members(path):
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def repack(src, dest, change):
    """A copy of a bundle with change(name, data) -> data applied to every file."""
    with tarfile.open(dest, "w:gz") as tar:
        for name, data in members(src).items():
            data = change(name, data)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return dest


def test_a_bundle_holds_the_run_every_cited_run_and_a_manifest(reports):
    path = write_bundle(reports, "b")
    assert path == reports / "b.bundle.tar.gz"
    files = members(path)
    listed, bad = parse_manifest(files.pop(MANIFEST).decode())
    assert bad == []
    assert set(files) == set(listed) >= {
        "b/g4.json", "b/g4.html", "b/summary.html", "b/summary.json", "b/evidence/g4-raw.json",
        "a/g1.json", "a/g3.html", "a/evidence/g1-raw.json"}
    assert all(hashlib.sha256(data).hexdigest() == listed[name] for name, data in files.items())
    assert not any(name.startswith("lonely/") for name in files)


def test_an_intact_bundle_verifies(reports):
    files, problems = verify(write_bundle(reports, "b"))
    assert problems == []
    assert {MANIFEST, "b/g4.json", "b/summary.html", "a/g1.json"} <= set(files)


def test_one_altered_evidence_byte_in_a_bundle_is_named(reports, tmp_path):
    bundle = write_bundle(reports, "b")
    evil = repack(bundle, tmp_path / "evil.tar.gz", lambda name, data: data.replace(
        b"[1, 2", b"[1, 9") if name == "a/evidence/g2-raw.json" else data)
    _, problems = verify(evil)
    assert problems
    assert all(p.startswith("a/evidence/g2-raw.json: altered") for p in problems)
    # Named by MANIFEST.sha256 and by every record of run a that lists it (G2 and G3).
    assert len(problems) == 3


def test_an_altered_html_report_in_a_bundle_is_named(reports, tmp_path):
    bundle = write_bundle(reports, "b")
    evil = repack(bundle, tmp_path / "evil.tar.gz", lambda name, data: data.replace(
        b"G4 stability", b"G4 stabi1ity") if name == "b/g4.html" else data)
    _, problems = verify(evil)
    now = hashlib.sha256(members(evil)["b/g4.html"]).hexdigest()
    was = parse_manifest(members(bundle)[MANIFEST].decode())[0]["b/g4.html"]
    assert problems[0] == f"b/g4.html: altered (SHA-256 {now[:16]}… but {MANIFEST} recorded " \
                          f"{was[:16]}…)"
    assert problems[1].startswith("b/g4.html: the report was altered")
    assert len(problems) == 2


def test_files_added_to_or_dropped_from_a_bundle_are_named(reports, tmp_path):
    bundle = write_bundle(reports, "b")
    src = members(bundle)
    with tarfile.open(tmp_path / "evil.tar.gz", "w:gz") as tar:
        for name, data in [*src.items(), ("a/evidence/planted.log", b"x"), ("a/notes.txt", b"y")]:
            if name != "a/g2.html":
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    _, problems = verify(tmp_path / "evil.tar.gz")
    # Named by MANIFEST.sha256 and by the run folder's own check (what its records imply).
    assert sorted(problems) == [
        "a/evidence/planted.log: unlisted (in the bundle, but not in MANIFEST.sha256)",
        "a/evidence/planted.log: unlisted (in the evidence folder, but no record's manifest "
        "lists it)",
        "a/g2.html: missing (listed in MANIFEST.sha256)",
        "a/g2.html: missing (the report of a/g2.json)",
        "a/notes.txt: unlisted (in the bundle, but not in MANIFEST.sha256)",
        "a/notes.txt: unlisted (in the run folder, but not a record, report, seal file, "
        "signature or evidence file kvgate writes there)"]


def hostile(tmp_path, make):
    path = tmp_path / "hostile.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info, data = make()
        tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name, data=b"owned"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name, target, kind):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _device(name):
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info, None


@pytest.mark.parametrize(("make", "said"), [
    (lambda: _file("../../escaped.txt"), "absolute path or '..'"),
    (lambda: _file("/tmp/kvgate-escaped.txt"), "absolute path or '..'"),
    (lambda: _file("a/../../escaped.txt"), "absolute path or '..'"),
    (lambda: _link("a/passwd", "/etc/passwd", tarfile.SYMTYPE), "outside the archive"),
    (lambda: _link("a/up", "../../..", tarfile.SYMTYPE), "outside the archive"),
    (lambda: _link("a/hard", "../outside", tarfile.LNKTYPE), "outside the archive"),
    (lambda: _device("a/null"), "device or FIFO"),
])
def test_hostile_archives_are_refused_whole(tmp_path, make, said):
    path = hostile(tmp_path, make)
    files, problems = verify(path)
    assert files == []
    assert len(problems) == 1
    assert problems[0].startswith("hostile.tar.gz: refused: member")
    assert said in problems[0]
    assert not (tmp_path / "escaped.txt").exists()


class Zeros(io.RawIOBase):
    """n zero bytes, read without holding them: a bomb's payload."""

    def __init__(self, n: int):
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        k = min(len(buffer), self.left)
        buffer[:k] = bytes(k)
        self.left -= k
        return k


def test_a_decompression_bomb_is_refused_on_its_headers_before_it_unpacks(tmp_path):
    """Issue #27: a 2 MB gzip bomb took verify 66 s and 4.3 GB of disk."""
    path = tmp_path / "bomb.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for i in range(2):  # 2 x 48 MiB of zeros: past the 64 MiB floor, ~200 KiB of archive
            info = tarfile.TarInfo(f"run/evidence/zeros-{i}.bin")
            info.size = 48 << 20
            tar.addfile(info, Zeros(info.size))
    assert path.stat().st_size < 1 << 20
    files, problems = verify(path)
    assert files == [] and len(problems) == 1, problems
    assert problems[0].startswith("bomb.tar.gz: refused: its members unpack to more than "
                                  "67,108,864 bytes (100 times its"), problems[0]
    assert "decompression bomb" in problems[0]


def test_a_file_that_is_not_an_archive_is_named(tmp_path):
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(b"not gzip at all")
    _, problems = verify(path)
    assert problems == [problems[0]]
    assert problems[0].startswith("bundle.tar.gz: not a readable .tar.gz bundle")


def test_bundle_command_writes_once_and_names_the_file(reports, capsys):
    assert bundle_command(parse(["bundle", "b", "--out", str(reports)])) == 0
    assert f"bundle {reports / 'b.bundle.tar.gz'}: " in capsys.readouterr().out
    assert bundle_command(parse(["bundle", "b", "--out", str(reports)])) == 2
    assert "already exists; kvgate never overwrites" in capsys.readouterr().err


def test_bundle_command_with_an_output_file(reports, tmp_path):
    target = tmp_path / "site-a.tar.gz"
    assert bundle_command(parse(["bundle", "b", "--out", str(reports), "-o", str(target)])) == 0
    assert verify(target)[1] == []


def test_an_unknown_run_names_the_store(reports, capsys):
    assert bundle_command(parse(["bundle", "nope", "--out", str(reports)])) == 2
    assert f"run nope is not in the store {reports / 'kvgate.sqlite'}" in capsys.readouterr().err


def test_a_missing_store_is_named_and_not_created(tmp_path, capsys):
    assert bundle_command(parse(["bundle", "b", "--out", str(tmp_path / "none")])) == 2
    assert f"no kvgate store at {tmp_path / 'none' / 'kvgate.sqlite'}" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_a_run_citing_a_vanished_run_cannot_be_bundled(reports):
    shutil.rmtree(reports / "a")
    with pytest.raises(BundleError, match="run folder .*/a is missing \\(cited from run b\\)"):
        write_bundle(reports, "b")
    assert not (reports / "b.bundle.tar.gz").exists()


def test_a_run_killed_before_any_record_is_not_bundled_and_says_what_is_missing(reports,
                                                                                capsys):
    # #27: it was bundled (exit 0, nothing said), and the bundle then failed `kvgate verify`.
    (reports / "lonely" / "evidence" / "engine.log").write_text("killed mid-run\n")
    assert bundle_command(parse(["bundle", "lonely", "--out", str(reports)])) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert f"run lonely has no gate record (no g1.json … g4.json in {reports / 'lonely'}): it " \
           "stopped before its first gate finished (killed?), or it is still running" in err
    assert "nothing to bundle until a gate writes its record" in err
    assert not (reports / "lonely.bundle.tar.gz").exists()


def test_a_symbolic_link_in_a_run_folder_is_refused(reports, tmp_path):
    (reports / "b" / "evidence" / "link.log").symlink_to(tmp_path)
    with pytest.raises(BundleError, match="link.log is a symbolic link"):
        write_bundle(reports, "b")


@given(st.text())
def test_any_manifest_text_parses_without_error(text):
    digests, bad = parse_manifest(text)
    assert len(digests) + len(bad) <= len(text.splitlines())


@given(st.dictionaries(st.text("abcdef/._- ", min_size=1).filter(lambda s: "\n" not in s),
                       st.text("0123456789abcdef", min_size=64, max_size=64)))
def test_the_manifest_round_trips(digests):
    assert parse_manifest(manifest_text(digests)) == (digests, [])
