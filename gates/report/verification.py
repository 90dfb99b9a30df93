"""`kvgate verify`: re-check records, evidence, report seals, the chain and a bundle's manifest.

PATH is a run folder, one gate JSON, a bundle (.tar.gz), an extracted bundle, a comparison's
folder (comparison_check.py) or a sweep's (sweep_check.py). Every problem
names the file as a path relative to what was given (inside a bundle: the path in the archive)
and says what is wrong with it. A run folder is checked whole: every report its records imply
(<gate>.html and <gate>.html.seal beside <gate>.json, summary.html beside summary.json) must be
there and sealed, and every file in it must be one kvgate writes there or evidence a record
lists; anything else is named, at the top level as in evidence/. Signatures and the
report-record binding are checked here too (gates/report/trust.py); who signed is judged
against the reader's keys by Verification.judge.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from ..store import MANIFEST, BundleError, parse_manifest, safe_extract, sha256_file
from .citing import cited, read_json
from .comparison_check import check_comparison, is_comparison
from .given import ARCHIVES, check_given
from .layout import EVIDENCE, check_implied, check_orphans, check_unlisted_top
from .record_check import check_record, record_digest
from .sealing import SEAL_ID, check_seal
from .summary import SUMMARY_HASH_KEY, summary_digest, summary_findings
from .sweep_check import check_sweep, is_sweep
from .trust import Verification, check_signed, stray_signatures
from .trust import rel as _name

RECORDS = "g[1-4].json"


def check_chain(path: Path, root: Path | None = None) -> list[str]:
    """The upstream record a gate cites must exist beside this run and hash as cited."""
    body, _ = read_json(path, root)
    up = (body or {}).get("upstream")
    if not isinstance(up, dict):
        return []
    return cited(path, root, str(up.get("gate")), str(up.get("run_id", "")),
                  str(up.get("record_sha256")))


def _sidecar(path: Path, html: str, root: Path | None) -> list[str]:
    """A <report>.seal file beside the report must name the seal the report carries.

    Its absence is named by check_implied (a gate report must have one; the summary has none).
    """
    sidecar = path.with_name(path.name + ".seal")
    if not sidecar.is_file() or sidecar.is_symlink():
        return []
    written = (sidecar.read_text(errors="replace").split() or [""])[0]
    inside = re.search(rf'id="{SEAL_ID}">([0-9a-f]{{64}})<', html)
    if inside and inside.group(1) == written:
        return []
    return [f"{_name(sidecar, root)}: names seal {written[:16]}…, not the one inside "
            f"{path.name}"]


def check_report_seal(path: Path, root: Path | None = None) -> list[str]:
    """An HTML report must carry a seal that matches its content (and its .seal file)."""
    try:
        html = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"{_name(path, root)}: unreadable ({exc})"]
    problem = check_seal(html)
    return [f"{_name(path, root)}: {problem}"] if problem else _sidecar(path, html, root)


def check_summary(path: Path, root: Path | None = None) -> list[str]:
    """summary.json must hash as it says and cite records that are here, as they are."""
    body, problem = read_json(path, root)
    if body is None:
        return [problem]
    problems = []
    if summary_digest(body) != body.get(SUMMARY_HASH_KEY):
        problems.append(f"{_name(path, root)}: the summary was altered (its SHA-256 no longer "
                        f"matches {str(body.get(SUMMARY_HASH_KEY))[:16]}…)")
    for link in body.get("chain") or []:
        if isinstance(link, dict) and link.get("run_id"):
            problems += cited(path, root, str(link.get("gate")), str(link["run_id"]),
                               str(link.get("record_sha256")))
    found, _ = summary_findings(body, _carried(path))
    return problems + [f"{_name(path, root)}: {p}" for p in found]


def _carried(summary: Path):
    """carried(run, gate): the deviations' texts of a record beside the summary's run (a waiver
    names one by its whole text), or None."""
    def carried(run_id: str, gate: str) -> list[str] | None:
        if Path(run_id).name != run_id or run_id in (".", ".."):
            return None
        body, _ = read_json(summary.parent.parent / run_id / f"{gate}.json")
        return [_text(d) for d in (body or {}).get("deviations") or []] \
            if body is not None else None
    return carried


def _text(deviation: object) -> str:
    """A record's deviation as JSON: {"cause", "text"}, or an older record's bare text."""
    return deviation.get("text", "") if isinstance(deviation, dict) else str(deviation)


def check_unlisted(folder: Path, records: list[Path], root: Path | None) -> list[str]:
    """Evidence files no record of the run lists: added after the fact, or never hashed."""
    listed = set()
    for path in records:
        body, _ = read_json(path)
        listed |= set((body or {}).get("evidence") or {})
    evidence = folder / EVIDENCE
    found = sorted(p for p in evidence.rglob("*") if p.is_file() or p.is_symlink())
    return [f"{_name(p, root)}: unlisted (in the evidence folder, but no record's manifest "
            "lists it)" for p in found if p.relative_to(folder).as_posix() not in listed]


def check_signatures(paths: list[Path], root: Path | None) -> Verification:
    """Each gate JSON's and summary.json's signature, and the report beside each bound to it."""
    found = Verification()
    for path in paths:
        body, _ = read_json(path)  # an unreadable JSON is named by check_record / check_summary
        if body is None:
            continue
        summary = path.name == "summary.json"
        digest = summary_digest(body) if summary else record_digest(body)
        problems, signer = check_signed(path, digest, root,
                                        None if summary else body.get("decision_rule"))
        found.problems += problems
        found.signers[_name(path, root)] = signer
        if summary:  # each waiver inside it is signed by its performer too
            for n, fp in enumerate(summary_findings(body, _carried(path))[1], 1):
                found.signers[f"{_name(path, root)} waiver {n}"] = fp
    return found


def _signed(paths: list[Path], root: Path | None, missing: set[Path]) -> Verification:
    """check_signatures, without naming a second time a report already named missing."""
    found = check_signatures(paths, root)
    gone = {f"{_name(p, root)}: missing or unreadable" for p in missing}
    found.problems = [p for p in found.problems if not any(p.startswith(g) for g in gone)]
    return found


def _summary_implied(folder: Path, records: list[Path], root: Path | None) -> list[str]:
    """A run that wrote gate records wrote their procurement summary: its absence is named."""
    summary = folder / "summary.json"
    if not records or (summary.is_file() and not summary.is_symlink()):
        return []
    return [f"{_name(summary, root)}: missing (a run folder with gate records holds their "
            "procurement summary, summary.json and summary.html: deleted, its recommendation "
            "is gone with it)"]


def check_run(folder: Path, root: Path) -> Verification:
    """Files checked, problems and signers for one run folder, names relative to root."""
    records = sorted(p for p in folder.glob(RECORDS) if p.is_file())
    reports = sorted(p for p in folder.glob("g[1-4].html") if p.is_file()) + [
        p for p in [folder / "summary.html"] if p.is_file()]
    summary = [p for p in [folder / "summary.json"] if p.is_file()]
    problems = [p for f in records for p in check_record(f, root) + check_chain(f, root)]
    lacking, missing = check_implied(records + summary, root)
    problems += lacking + _summary_implied(folder, records, root)
    problems += [p for f in reports for p in check_report_seal(f, root)]
    problems += [p for f in summary for p in check_summary(f, root)]
    problems += stray_signatures(folder, root) + check_orphans(folder, root)
    problems += check_unlisted_top(folder, root)
    if records:
        problems += check_unlisted(folder, records, root)
    else:
        problems.append(f"{_name(folder, root)}: no gate record (g1.json … g4.json) here")
    checked = Verification([_name(f, root) for f in records + reports + summary], problems)
    return checked.add(_signed(records + summary, root, missing))


def check_manifest(root: Path) -> tuple[list[str], list[str]]:
    """(files listed, problems) of a bundle's MANIFEST.sha256 against the files beside it."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        return [], [f"{MANIFEST}: missing (every bundle carries one at its top level)"]
    digests, bad = parse_manifest(manifest.read_text(encoding="utf-8", errors="replace"))
    problems = [f"{MANIFEST}: {line} is not '<SHA-256>  <path>'" for line in bad]
    for name, digest in sorted(digests.items()):
        file = root / name
        if not file.is_file() or file.is_symlink():
            problems.append(f"{name}: missing (listed in {MANIFEST})")
        elif (actual := sha256_file(file)) != digest:
            problems.append(f"{name}: altered (SHA-256 {actual[:16]}… but {MANIFEST} recorded "
                            f"{digest[:16]}…)")
    present = {_name(p, root) for p in root.rglob("*") if p.is_file() or p.is_symlink()}
    problems += [f"{name}: unlisted (in the bundle, but not in {MANIFEST})"
                 for name in sorted(present - set(digests) - {MANIFEST})]
    return [MANIFEST], problems


def verify_tree(root: Path) -> Verification:
    """Everything found in an extracted bundle: its manifest and every run in it."""
    found = Verification(*check_manifest(root))
    runs = sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob(RECORDS)))
    for folder in runs:
        found.add(check_run(folder, root))
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and is_comparison(p)):
        found.add(check_comparison(folder, root, records_checked=True))
    sweeps = sorted(p for p in root.iterdir() if p.is_dir() and is_sweep(p))
    for folder in sweeps:
        found.add(check_sweep(folder, root))
    if not runs and not sweeps:  # a sweep's run folder holds evidence, no gate record
        found.problems.append("no run folder with a gate record (<run>/g1.json …) in the bundle")
    return found


def verify_bundle(archive: Path) -> Verification:
    """Everything found in a bundle file, extracted safely to a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="kvgate-verify-") as tmp:
        try:
            safe_extract(archive, Path(tmp))
        except BundleError as exc:
            return Verification([], [str(exc)])
        return verify_tree(Path(tmp))


def examine(path: Path) -> Verification:
    """Files checked, problems and signers for a run folder, one gate JSON, or a bundle.

    Raises NotVerifiable (gates.report.given) for a path that is none of them: bad input.
    """
    path = Path(path)
    check_given(path)
    if path.is_file() and path.name.endswith(ARCHIVES):
        return verify_bundle(path)
    if path.is_file():
        root = path.parent
        html = [p for p in [path.with_suffix(".html")] if p.is_file()]
        problems = check_record(path, root) + check_chain(path, root)
        lacking, missing = check_implied([path], root)
        problems += lacking + [p for f in html for p in check_report_seal(f, root)]
        checked = Verification([path.name] + [f.name for f in html], problems)
        return checked.add(_signed([path], root, missing))
    if (path / MANIFEST).is_file():
        return verify_tree(path)
    if is_comparison(path):
        return check_comparison(path, path)
    if is_sweep(path):
        return check_sweep(path, path)
    return check_run(path, path)


def verify(path: Path) -> tuple[list[str], list[str]]:
    """(files checked, problems) for a run folder, one gate JSON, or a bundle: examine()."""
    found = examine(path)
    return found.files, found.problems
