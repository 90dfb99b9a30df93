"""Evidence bundles: one .tar.gz holding a run, every run its chain cites, and a manifest.

The archive holds <run_id>/… folders (reports, records, summary, evidence) side by side, as
they sit under reports/, so `kvgate verify` can walk the chain from the bundle alone, and a
top-level MANIFEST.sha256 that `sha256sum -c` accepts. Extraction here is defensive: absolute
paths, "..", links leaving the archive and device files are refused, never skipped quietly.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tarfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from .names import check_run_id

MANIFEST = "MANIFEST.sha256"
# What `kvgate compare` writes in its folder (reports/compare-…/), citing runs by id: a bundle of
# a comparison holds it and every run it cites. gates.report.layout names it from here.
COMPARISON_JSON = "comparison.json"
# What `kvgate sweep` writes in its folder (reports/sweep-<run>/), naming its run, whose folder
# holds the sweep's evidence: a bundle of a sweep holds both.
SWEEP_JSON = "sweep.json"
SUFFIX = ".bundle.tar.gz"
# A bundle's JSON, HTML and logs gzip 5-20x (a demo's: 6x); a decompression bomb 1000x. Members
# are refused past this many times the archive's size (and past the floor for small bundles),
# judged on their headers before their bytes are unpacked, so verify never fills the disk.
UNPACK_RATIO_MAX = 100
UNPACK_FLOOR = 64 << 20


class BundleError(Exception):
    """A bundle that cannot be written or opened; the message names the file."""


def _cited_runs(folder: Path) -> list[str]:
    """Runs the records and the summary in a run folder stand on, a comparison cites, or
    whose evidence a sweep lists."""
    cited = []
    for path in sorted(folder.glob("g[1-4].json")) + [folder / "summary.json",
                                                        folder / COMPARISON_JSON,
                                                        folder / SWEEP_JSON]:
        try:
            body = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError) as exc:
            raise BundleError(f"{path}: unreadable ({exc})") from None
        links = [body.get("upstream") or {}] + list(body.get("chain") or []) + [
            rec for col in body.get("columns") or [] for rec in col.get("records") or []] + (
            [body] if path.name == SWEEP_JSON else [])
        cited += [link["run_id"] for link in links if link.get("run_id")]
        # a comparison's candidates' sweeps, by their folders (sweep-<run>)
        cited += [col["sweep"]["id"] for col in body.get("columns") or []
                  if isinstance(col.get("sweep"), dict) and col["sweep"].get("id")]
    return cited


def runs_to_bundle(out: Path, run_id: str) -> list[str]:
    """The run and, transitively, every run its records and summary cite, in visiting order."""
    todo, seen = [run_id], []
    while todo:
        run = check_run_id(todo.pop(0))
        if run in seen:
            continue
        folder = out / run
        if not folder.is_dir():
            raise BundleError(f"run folder {folder} is missing"
                              + ("" if run == run_id else f" (cited from run {seen[-1]})"))
        seen.append(run)
        todo += _cited_runs(folder)
    return seen


def bundle_members(out: Path, runs: list[str]) -> list[tuple[str, Path]]:
    """(name inside the archive, file) for every file of the runs and their pytest-html pages."""
    members = []
    for run in runs:
        extra = out / "pytest-html" / f"{run}.html"
        files = sorted((out / run).rglob("*")) + ([extra] if extra.is_file() else [])
        for path in files:
            if path.is_symlink():
                raise BundleError(f"{path} is a symbolic link: kvgate writes none into a run "
                                  "folder, so it will not bundle one; remove it first")
            if path.is_file():
                members.append((path.relative_to(out).as_posix(), path))
    return members


class _Hashing:
    """A file reader that hashes what tarfile reads through it."""

    def __init__(self, handle):
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        block = self.handle.read(size)
        self.digest.update(block)
        return block


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    # The archive says nothing about the engineer's account.
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _add(tar: tarfile.TarFile, name: str, path: Path) -> str:
    info = _plain(tar.gettarinfo(str(path), arcname=name))
    with path.open("rb") as handle:
        reader = _Hashing(handle)
        tar.addfile(info, reader)
    return reader.digest.hexdigest()


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, _BytesReader(data))


class _BytesReader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self.data) if size < 0 else self.at + size
        block, self.at = self.data[self.at:end], min(end, len(self.data))
        return block


def manifest_text(digests: dict[str, str]) -> str:
    """MANIFEST.sha256 in sha256sum's format: "<hex>  <path>", one file a line, sorted."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))


def _recorded(folder: Path, run_id: str) -> None:
    """A run with no gate record yet has nothing a bundle could prove: say so, write none."""
    if not any(folder.glob("g[1-4].json")) and not any(
            (folder / name).is_file() for name in (COMPARISON_JSON, SWEEP_JSON)):
        raise BundleError(f"run {run_id} has no gate record (no g1.json … g4.json in {folder}): "
                          "it stopped before its first gate finished (killed?), or it is still "
                          f"running (a soak: `kvgate soak status {run_id}`); there is nothing "
                          "to bundle until a gate writes its record")


def write_bundle(out: Path, run_id: str, dest: Path | None = None,
                 on_file: Callable[[str], None] | None = None) -> Path:
    """Pack the run (or a comparison's folder) and every run its chain cites into dest; an
    existing dest is an error."""
    out = Path(out)
    runs = runs_to_bundle(out, run_id)
    _recorded(out / runs[0], run_id)
    members = bundle_members(out, runs)
    dest = Path(dest) if dest else out / f"{run_id}{SUFFIX}"
    try:
        handle = dest.open("xb")
    except FileExistsError:
        raise BundleError(f"{dest} already exists; kvgate never overwrites a bundle: "
                          "name another with -o FILE") from None
    except OSError as exc:
        raise BundleError(f"cannot create {dest}: {exc}") from None
    try:
        with handle, tarfile.open(fileobj=handle, mode="w:gz") as tar:
            digests = {}
            for name, path in members:
                digests[name] = _add(tar, name, path)
                if on_file:
                    on_file(name)
            _add_text(tar, MANIFEST, manifest_text(digests))
    except BaseException:
        dest.unlink(missing_ok=True)  # a half-written bundle must not look like a bundle
        raise
    return dest


# ---- reading --------------------------------------------------------------------------------

def _outside(name: str) -> bool:
    path = PurePosixPath(name)
    return path.is_absolute() or ".." in path.parts or name.startswith("\\") or (
        len(name) > 1 and name[1] == ":")


def refusal(member: tarfile.TarInfo) -> str:
    """Why a member may not be extracted ("" when it may)."""
    if _outside(member.name):
        return f"member {member.name!r} has an absolute path or '..': it would land outside"
    if member.isdev():
        return f"member {member.name!r} is a device or FIFO, not a file"
    if member.issym() or member.islnk():
        base = posixpath.dirname(member.name) if member.issym() else ""
        target = posixpath.normpath(posixpath.join(base, member.linkname))
        if _outside(member.linkname) or _outside(target):
            return f"member {member.name!r} links to {member.linkname!r}, outside the archive"
    elif not (member.isfile() or member.isdir()):
        return f"member {member.name!r} is of an unsupported type"
    return ""


def safe_extract(archive: Path, into: Path) -> None:
    """Extract a bundle into a folder, refusing the whole archive if any member is unsafe or
    the members would unpack to more than UNPACK_RATIO_MAX times the archive."""
    try:
        size = archive.stat().st_size
        cap, total, members = max(UNPACK_FLOOR, UNPACK_RATIO_MAX * size), 0, []
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:  # one header at a time: a bomb is refused before it unpacks
                why = refusal(member)
                total += member.size
                if not why and total > cap:
                    why = (f"its members unpack to more than {cap:,} bytes "
                           f"({UNPACK_RATIO_MAX} times its {size:,} bytes, or "
                           f"{UNPACK_FLOOR >> 20} MiB): no kvgate bundle compresses so far "
                           "(a decompression bomb?)")
                if why:
                    raise BundleError(f"{archive.name}: refused: {why}")
                members.append(member)
            tar.extractall(into, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BundleError(f"{archive.name}: not a readable .tar.gz bundle ({exc})") from None


def parse_manifest(text: str) -> tuple[dict[str, str], list[str]]:
    """(path -> SHA-256, lines that are not "<64 hex>  <path>") of a MANIFEST.sha256."""
    digests, bad = {}, []
    for number, line in enumerate(text.splitlines(), 1):
        digest, sep, name = line.partition("  ")
        name = name.removeprefix("*")  # sha256sum's binary-mode marker
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) \
                or not name:
            bad.append(f"line {number}")
        else:
            digests[name] = digest
    return digests, bad
