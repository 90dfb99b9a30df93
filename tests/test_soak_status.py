"""Issue #27: `kvgate soak status` says what a soak is, and only reads the store to say it.

Before the fix, status of a G4 that had already ended in ERROR (its record written with
windows left) said "resume with `kvgate soak resume …`": the wrong advice, for a soak whose
verdict stands. And status of a folder without a store created one there.
"""

from __future__ import annotations

import os

import pytest
from _chain import add_gate, open_run

from gates.cli import main
from gates.core.verdicts import G4
from gates.soak import SoakPlan, SoakRunner
from gates.soak.liveness import RunnerMark
from gates.soak.store import SoakStore
from gates.store import DB_NAME, Store


class Boom:
    """A load whose engine dies in the first window: the soak stops, its G4 record is ERROR."""

    def run(self, index, seconds):
        raise RuntimeError("engine gone")


def said(capsys) -> str:
    both = capsys.readouterr()
    return (both.out + both.err).replace("\n", " ")


def ended_in_error(out):
    """A soak whose runner stopped in window 1 of 6 and whose run holds its G4 record (ERROR)."""
    with Store(out) as store:
        open_run(store, "soak")
        runner = SoakRunner.start(store, SoakPlan(run_id="soak", duration=60, window=10), Boom())
        with pytest.raises(RuntimeError):
            runner.run()
        add_gate(store, "soak", "g4", measurements=[G4["g4.soak"].error("G4 soak: engine gone")])


def test_status_of_a_soak_that_ended_in_error_says_it_ended_and_offers_no_resume(tmp_path,
                                                                                capsys):
    out = tmp_path / "reports"
    ended_in_error(out)
    assert main(["soak", "status", "soak", "--out", str(out)]) == 0
    text = said(capsys)
    assert "resume" not in text, text
    assert "runner: not running, and the soak has ended: its G4 record is written (ERROR) " \
           "with windows left, so its verdict stands (" in text
    assert f"{out.resolve() / 'soak' / 'g4.html'}); a new soak is `kvgate run g4`" in text


def test_a_soak_resumed_into_a_new_run_that_is_alive_is_running_not_ended(tmp_path, capsys):
    out = tmp_path / "reports"
    ended_in_error(out)
    with Store(out) as store:  # `kvgate soak resume` into a new run marks this process
        me = SoakStore(store).runner("soak")
        SoakStore(store).mark_runner("soak", RunnerMark(**(me.model_dump() | {
            "state": "running", "pid": os.getpid()})))
    assert main(["soak", "status", "soak", "--out", str(out)]) == 0
    assert f"runner: running (runner pid {os.getpid()}" in said(capsys)


def test_status_in_a_folder_without_a_store_says_so_and_creates_nothing(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["soak", "status", "--out", str(empty)]) == 2
    assert f"kvgate store {empty.resolve() / DB_NAME}: there is none (no kvgate run has " \
           "written to this folder): give the folder of your reports with --out" in said(capsys)
    assert list(empty.iterdir()) == []
    with pytest.raises(SystemExit) as refused:  # argparse's refusal, before any store
        main(["soak", "status", "--out", str(tmp_path / "missing")])
    assert refused.value.code == 2
    assert "no such folder" in said(capsys) and not (tmp_path / "missing").exists()


def test_status_of_a_store_without_any_soak_reads_it_and_changes_nothing(tmp_path, capsys):
    out = tmp_path / "reports"
    with Store(out) as store:
        open_run(store, "g1-only")
    before = (out / DB_NAME).read_bytes()
    assert main(["soak", "status", "--out", str(out)]) == 2
    assert f"no soak in {out / DB_NAME}" in said(capsys)
    with Store.reading(out) as store:
        assert not store.has_table("soak_plans")  # status created none of the soak's tables
    assert (out / DB_NAME).read_bytes() == before
