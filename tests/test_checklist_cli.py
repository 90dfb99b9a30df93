"""`kvgate checklist`: answers files, resume, interrupts, the exit code, and one real G1 run."""

import argparse
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from gates.checklist import ChecklistStore, add_checklist_commands, checklist_command
from gates.checklist.run import PromptAsker
from gates.checklist.store import GateAttempt
from gates.core.verdicts import Outcome
from gates.store import Store

ANSWERS = Path(__file__).parent / "data" / "checklist"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kvgate")
    add_checklist_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["checklist", *argv])
    args.pytest_args = []
    return args


@pytest.fixture
def site(tmp_path, repo, tiny_site):
    """site.toml, thresholds.toml and checklist.toml in tmp_path; the options naming them."""
    (tmp_path / "site.toml").write_text(tiny_site(tmp_path / "target"))
    shutil.copy(repo / "thresholds.toml", tmp_path / "thresholds.toml")
    shutil.copy(repo / "checklist.toml", tmp_path / "checklist.toml")
    return ["--site", str(tmp_path / "site.toml"), "--thresholds",
            str(tmp_path / "thresholds.toml"), "--checklist", str(tmp_path / "checklist.toml"),
            "--out", str(tmp_path / "reports")]


class Gates:
    """The gate-running seam's double: a verdict per gate, and the runs it was asked for."""

    def __init__(self, **verdicts: Outcome):
        self.verdicts, self.ran = verdicts, []

    def __call__(self, request) -> GateAttempt:
        self.ran.append(request.gate)
        verdict = self.verdicts.get(request.gate, Outcome.PASS)
        if verdict is None:
            raise KeyboardInterrupt
        return GateAttempt(gate=request.gate, run_id=request.run_id, verdict=verdict,
                           exit_code={Outcome.PASS: 0, Outcome.FAIL: 1}.get(verdict, 2),
                           report=f"reports/{request.run_id}/{request.gate}.html")


def run(args, gates, text: str | None = None) -> tuple[int, str]:
    shown = io.StringIO()
    console = Console(file=shown, width=200, soft_wrap=True)
    asker = PromptAsker(console, io.StringIO(text)) if text is not None else None
    return checklist_command(args, asker=asker, run_gate=gates, console=console), shown.getvalue()


def stored(tmp_path, checklist_id=None):
    with Store(tmp_path / "reports") as store:
        answers = ChecklistStore(store)
        checklist_id = checklist_id or answers.latest_ids()[0]
        return checklist_id, answers.answers(checklist_id), answers.attempts(checklist_id)


def test_answers_file_runs_every_gate_without_prompts(tmp_path, site):
    gates = Gates()
    code, out = run(parse(*site, "--answers", str(ANSWERS / "answers-all.toml")), gates)
    assert code == 0 and gates.ran == ["g1", "g2", "g3", "g4"]
    _, answers, attempts = stored(tmp_path)
    assert len(answers) == 15 and {a.operator for a in answers} == {"A. Engineer"}
    assert [a.verdict for a in attempts] == [Outcome.PASS] * 4
    assert "4 pass, 1 n.a." in out and "every gate passed" in out


def test_exit_code_is_the_first_gate_that_did_not_pass(tmp_path, site):
    gates = Gates(g2=Outcome.FAIL)
    code, out = run(parse(*site, "--answers", str(ANSWERS / "answers-all.toml")), gates)
    assert code == 1 and gates.ran == ["g1", "g2"]
    checklist_id, answers, _ = stored(tmp_path)
    assert {a.gate for a in answers} == {"g1", "g2"}  # G3's items are not asked after a stop
    assert "G2 single-node baseline: FAIL" in out and "failures are listed first" in out
    assert f"kvgate checklist --resume {checklist_id} --out {tmp_path / 'reports'}" in out


def test_answers_file_missing_items_is_refused_before_anything_runs(tmp_path, site, capsys):
    gates = Gates()
    code, _ = run(parse(*site, "--answers", str(ANSWERS / "answers-typos.toml"), "--gates",
                        "g1"), gates)
    assert code == 2 and gates.ran == [] and not (tmp_path / "reports").exists()
    err = capsys.readouterr().err
    assert "answers-typos.toml" in err and "no answer for g1.serials-match-po" in err
    assert "did you mean 'g1.serials-match-po'" in err


def test_failed_manual_item_stops_before_the_suite_and_says_what_to_do(tmp_path, site):
    gates = Gates()
    code, out = run(parse(*site, "--answers", str(ANSWERS / "answers-g1-fail.toml"),
                          "--gates", "g1"), gates)
    assert code == 1 and gates.ran == []
    assert "drive 3 serial S6XNNF0R1234 is not on the PO" in out
    assert "not run: manual item failed" in out
    assert "start a new checklist run for the remaining gates" in out
    assert "kvgate checklist --gates g1 --checklist" in out


def test_resume_keeps_earlier_answers_and_never_asks_them_again(tmp_path, site):
    gates = Gates()
    first = parse(*site, "--gates", "g1,g2")
    code, out = run(first, gates, "A. Engineer\npass\nPO 4711\nn.a.\n\n")  # input ends here
    assert code == 130 and gates.ran == []
    checklist_id, before, _ = stored(tmp_path)
    assert [a.answer for a in before] == ["pass", "n.a."]
    assert f"kvgate checklist --resume {checklist_id}" in out

    resumed = parse("--resume", checklist_id, "--out", str(tmp_path / "reports"))
    code, out = run(resumed, gates, "\n" + "p\n\n" * 3 + "p\n\n" * 4)
    assert code == 0 and gates.ran == ["g1", "g2"]
    assert "2 item(s) answered earlier, kept" in out and "G1 3/5" in out and "G1 2/5" not in out
    assert "serial numbers match" not in out and "cabling photographed" not in out
    _, after, _ = stored(tmp_path, checklist_id)
    assert after[:2] == before and len(after) == 9
    assert {a.operator for a in after} == {"A. Engineer"}  # Enter kept the stored operator


def test_resume_skips_passed_gates_and_reruns_the_failed_one(tmp_path, site):
    args = parse(*site, "--answers", str(ANSWERS / "answers-all.toml"), "--gates", "g1,g2,g3")
    code, _ = run(args, Gates(g2=Outcome.ERROR))
    assert code == 2
    checklist_id, _, first_attempts = stored(tmp_path)
    gates = Gates()
    code, out = run(parse("--resume", checklist_id, "--out", str(tmp_path / "reports"),
                          "--answers", str(ANSWERS / "answers-all.toml")), gates)
    assert code == 0 and gates.ran == ["g2", "g3"]
    assert "G1: passed earlier in this checklist run, skipped" in out
    _, answers, attempts = stored(tmp_path, checklist_id)
    assert len(answers) == 12 and attempts[:2] == first_attempts
    assert attempts[1].run_id != attempts[2].run_id and attempts[2].gate == "g2"


def test_ctrl_c_during_a_suite_keeps_the_answers_and_prints_the_resume_command(tmp_path, site):
    code, out = run(parse(*site, "--answers", str(ANSWERS / "answers-all.toml")),
                    Gates(g1=None))
    checklist_id, answers, attempts = stored(tmp_path)
    assert code == 130 and len(answers) == 5 and attempts == []
    assert "every answer given so far is stored" in out and checklist_id in out


def test_unknown_resume_id_names_the_store_and_the_newest_runs(tmp_path, site, capsys):
    run(parse(*site, "--answers", str(ANSWERS / "answers-all.toml"), "--gates", "g1"), Gates())
    checklist_id, _, _ = stored(tmp_path)
    code, _ = run(parse("--resume", "20260101T000000Z-000000", "--out",
                        str(tmp_path / "reports")), Gates())
    err = capsys.readouterr().err
    assert code == 2 and "no checklist run 20260101T000000Z-000000" in err and checklist_id in err


def test_no_terminal_and_no_answers_file_is_an_error_not_a_hang(tmp_path, site):
    done = subprocess.run([sys.executable, "-m", "gates.cli", "checklist", *site],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--answers FILE" in done.stderr
    assert not (tmp_path / "reports").exists()


@pytest.mark.skipif(shutil.which("fio") is None,
                    reason="fio is not installed (apt-get install fio)")
def test_real_g1_report_carries_the_answers_with_operator_and_time(tmp_path, site):
    """`kvgate checklist --answers … --gates g1` with real fio on a tiny site, end to end."""
    thresholds = (tmp_path / "thresholds.toml").read_text()
    for strict, relaxed in [('steady_state_spread_max = "20 %"', 'steady_state_spread_max = '
                             '"1000 %"'), ('steady_state_slope_max = "10 %"',
                                           'steady_state_slope_max = "1000 %"'),
                            ("steady_state_required = true", "steady_state_required = false")]:
        thresholds = thresholds.replace(strict, relaxed)
    (tmp_path / "thresholds.toml").write_text(thresholds)
    done = subprocess.run([sys.executable, "-m", "gates.cli", "checklist", *site,
                           "--answers", str(ANSWERS / "answers-g1.json"), "--gates", "g1"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    [record_file] = (tmp_path / "reports").glob("*/g1.json")
    record = json.loads(record_file.read_text())
    exit_codes = {"PASS": 0, "FAIL": 1, "MARGINAL": 1, "ERROR": 2, "BLOCKED": 3}
    assert done.returncode == exit_codes[record["verdict"]], done.stdout + done.stderr
    _, _, [attempt] = stored(tmp_path)
    assert attempt.verdict.value == record["verdict"] and attempt.run_id == record["run_id"]
    assert Path(attempt.report) == record_file.with_suffix(".html").resolve()
    assert "kvgate checklist" in done.stdout and record["verdict"] in done.stdout
    by_id = {a["item_id"]: a for a in record["checklist"]}
    assert list(by_id) == ["g1.serials-match-po", "g1.cabling-photographed",
                           "g1.firmware-recorded", "g1.layout-matches-order",
                           "g1.ports-match-order"]
    assert {a["operator"] for a in record["checklist"]} == {"B. Field-Engineer"}
    assert all(a["answered_at"].endswith("+00:00") for a in record["checklist"])
    serials = by_id["g1.serials-match-po"]
    assert serials["answer"] == "pass" and serials["note"] == (
        "PO 4711 & delivery note <DN-88>: serials match")
    html = record_file.with_suffix(".html").read_text()
    table = html[html.index('id="checklist"'):]
    assert "PO 4711 &amp; delivery note &lt;DN-88&gt;: serials match" in table
    assert "B. Field-Engineer" in table and serials["answered_at"] in table
