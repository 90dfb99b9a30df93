"""A resumed soak's evidence: the earlier engines' logs, and what changed since it started.

A soak killed mid-run (kill -9, a crash, a reboot) never hashed its engine's log: the G4 fixture
adds it to the evidence when the soak returns, and a killed one does not return. The resume
carries those logs into the evidence of the record it writes, named `<log>.before-resume-N.log`
so the reader can tell them from the resumed engine's own log, with their line and traceback
counts for the record's facts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..core.verdicts import Cause, Deviation
from ..store import Store
from .rules import StartOptions

TRACEBACK = "Traceback (most recent call last)"


def start_options(force: bool, site: Path, thresholds: Path, metrics_port: int | None,
                  checklist_id: str) -> StartOptions:
    """The options a soak starts with, as its plan keeps them for a resume."""
    def where(path: Path) -> str:
        # A file that is not here is kvgate's embedded default: the resume picks it again.
        return str(Path(path).resolve()) if Path(path).is_file() else ""
    return StartOptions(force=force, site=where(site), thresholds=where(thresholds),
                        metrics_port=metrics_port, checklist_id=checklist_id)


def _unused(folder: Path, stem: str, kind: str) -> Path:
    n = 1
    while (folder / f"{stem}.{kind}-{n}.log").exists():
        n += 1
    return folder / f"{stem}.{kind}-{n}.log"


def carry_engine_logs(store: Store, run_id: str, soak_run: str,
                      name: str) -> tuple[Path, list[Path]]:
    """(the log the resumed engine writes, the earlier logs now evidence of run_id).

    In the soak's own run an unhashed log is renamed <stem>.before-resume-N.log and hashed (an
    unhashed <stem>.after-resume-N.log is hashed under its name); in another run (the soak's
    own already has a G4 record) every engine log of the soak's run is copied in under such
    names. The resumed engine then writes a log of its own.
    """
    here = store.run_dir(run_id) / "evidence"
    here.mkdir(parents=True, exist_ok=True)
    stem = name.removesuffix(".log")
    listed = set(store.manifest(run_id))
    carried = []
    if run_id == soak_run:
        # Every earlier engine's log: one written after a resume (<stem>.after-resume-N.log)
        # whose resume was killed in turn was never hashed either, and must not stay unlisted.
        earlier = sorted(here.glob(f"{stem}.*-resume-*.log"))
        log = here / name
        for path in earlier + ([log] if log.is_file() else []):
            if f"evidence/{path.name}" in listed:
                continue
            if path == log:
                path = log.rename(_unused(here, stem, "before-resume"))
            store.add_evidence(run_id, path)
            carried.append(path)
        # A log hashed already (its soak returned, then died) is never appended to.
        return (_unused(here, stem, "after-resume") if log.exists() else log), carried
    source = store.run_dir(soak_run) / "evidence"
    for path in sorted(source.glob(f"{stem}*.log"), key=lambda p: (p.stat().st_mtime, p.name)):
        copy = _unused(here, stem, "before-resume")
        shutil.copy2(path, copy)
        store.add_evidence(run_id, copy)
        carried.append(copy)
    return here / name, carried


def log_summary(path: Path, run_dir: Path) -> str:
    """An earlier engine log as the record's facts name it: where, lines, Python tracebacks."""
    text = path.read_text(errors="replace")
    return (f"{path.relative_to(run_dir).as_posix()} ({len(text.splitlines())} lines, "
            f"{text.count(TRACEBACK)} Python tracebacks)")


def changed_files(store: Store, soak_run: str, site_sha256: str,
                  thresholds_sha256: str) -> list[Deviation]:
    """Deviations for a resume that read other configuration files than the soak began with."""
    began = store.run(soak_run) or {}
    out = []
    for label, was, now in (("site file", began.get("site_sha256"), site_sha256),
                            ("thresholds file", began.get("thresholds_sha256"),
                             thresholds_sha256)):
        if was and now and was != now:
            out.append(Deviation(cause=Cause.RESUMED_OTHER_FILES, text=(
                f"resumed with another {label} than soak {soak_run} started with "
                f"(SHA-256 {now[:16]}… instead of {was[:16]}…)")))
    return out
