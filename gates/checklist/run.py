"""The checklist run's engine: ask a gate's manual items, store each answer, run its suite."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TextIO

from rich.console import Console
from rich.markup import escape
from rich.prompt import InvalidResponse, Prompt

from ..core.verdicts import EXIT_CODES, ChecklistAnswer, Outcome
from ..store import Store, utc_now
from .items import AnswersFile, Checklist, ChecklistItem, full_id
from .store import ChecklistRun, ChecklistStore, GateAttempt

ALIASES = {"p": "pass", "pass": "pass", "ok": "pass", "f": "fail", "fail": "fail",
           "n": "n.a.", "na": "n.a.", "n.a.": "n.a.", "n/a": "n.a.", "n.a": "n.a."}
SUITE_GRACE_S = 60  # an interrupted suite gets this long to write its records before it is ended


class Asker(Protocol):
    """Where answers come from: the engineer at the terminal, or an answers file."""

    def operator(self, default: str) -> str:
        """The name of the engineer answering."""
        ...

    def answer(self, gate: str, item: ChecklistItem, position: str = "") -> tuple[str, str]:
        """One item's answer ("pass", "fail" or "n.a.") and note; position is e.g. "2/5"."""
        ...


class LinePrompt(Prompt):
    """A rich prompt whose input ending (a closed stream) is EOFError, never an endless re-ask."""

    @classmethod
    def get_input(cls, console: Console, prompt, password: bool,
                  stream: TextIO | None = None) -> str:
        """A line of input; EOFError at the end of the input."""
        line = console.input(prompt, password=password, stream=stream)
        if stream is not None and not line:
            raise EOFError
        return line.removesuffix("\n")  # as input() returns it, so Enter takes the default


class AnswerPrompt(LinePrompt):
    """pass / fail / n.a., with the short forms an engineer types (p, f, na, n/a)."""

    def process_response(self, value: str) -> str:
        """The answer the reply stands for; anything else is asked again."""
        answer = ALIASES.get(value.strip().lower())
        if answer is None:
            raise InvalidResponse("[red]answer pass, fail or n.a. (or p, f, na)[/]")
        return answer


@dataclass
class PromptAsker:
    """Asks the engineer at the terminal (or reads a stream, in tests) with rich prompts."""

    console: Console
    stream: TextIO | None = None

    def operator(self, default: str) -> str:
        """Ask the operator's name once; a blank name is asked again."""
        while True:
            name = LinePrompt.ask("Operator (your name, as it goes on the reports)",
                                  console=self.console, stream=self.stream,
                                  **({"default": default} if default else {}))
            if name.strip():
                return name.strip()

    def answer(self, gate: str, item: ChecklistItem, position: str = "") -> tuple[str, str]:
        """Show the question and where to look, then ask the answer and a note."""
        self.console.print(f"\n[bold]{gate.upper()} {position}[/] {escape(item.question)}",
                           highlight=False)
        if item.hint:
            self.console.print(f"  [dim]where to look: {escape(item.hint)}[/]", highlight=False)
        answer = AnswerPrompt.ask("  pass / fail / n.a.", console=self.console,
                                  stream=self.stream, show_choices=False)
        required = answer == "fail" and item.note_on_fail
        while True:
            note = LinePrompt.ask("  note" + (" (required: what failed)" if required else
                                              " (Enter for none)"),
                                  console=self.console, stream=self.stream, default="",
                                  show_default=False)
            if note.strip() or not required:
                return answer, note.strip()


@dataclass
class FileAsker:
    """Answers from an answers file, checked beforehand to hold every item asked."""

    given: AnswersFile

    def operator(self, default: str) -> str:
        """The answers file's operator."""
        return self.given.operator

    def answer(self, gate: str, item: ChecklistItem, position: str = "") -> tuple[str, str]:
        """The file's answer to this item."""
        found = self.given.answers[full_id(gate, item)]
        return found.answer, found.note


@dataclass
class GateRequest:
    """Run one gate's automated suite as part of a checklist run."""

    gate: str
    run_id: str
    checklist_id: str
    site: Path
    thresholds: Path
    out: Path
    pytest_args: list[str] = field(default_factory=list)


GateRunner = Callable[[GateRequest], GateAttempt]


def gate_argv(request: GateRequest) -> list[str]:
    """The `kvgate run` command line for a gate of the checklist."""
    return [sys.executable, "-m", "gates.cli", "run", request.gate, "--run-id", request.run_id,
            "--checklist-id", request.checklist_id, "--site", str(request.site),
            "--thresholds", str(request.thresholds), "--out", str(request.out),
            *(["--", *request.pytest_args] if request.pytest_args else [])]


def attempt_from_store(request: GateRequest, exit_code: int) -> GateAttempt:
    """How the gate ended, from its record in the store (ERROR when it wrote none)."""
    with Store(request.out) as store:
        records = [r for r in store.records(request.run_id) if r.gate == request.gate]
        report = store.run_dir(request.run_id) / f"{request.gate}.html"
    if not records:
        return GateAttempt(gate=request.gate, run_id=request.run_id, verdict=Outcome.ERROR,
                           exit_code=exit_code or EXIT_CODES[Outcome.ERROR], report="",
                           note=f"the suite wrote no {request.gate.upper()} record "
                           f"(exit code {exit_code}): see its output above")
    verdict = records[0].verdict
    return GateAttempt(gate=request.gate, run_id=request.run_id, verdict=verdict,
                       exit_code=EXIT_CODES[verdict],
                       report=str(report) if report.is_file() else "")


def run_gate_subprocess(request: GateRequest) -> GateAttempt:
    """Run the gate as `kvgate run` in a child process whose output reaches the terminal."""
    child = subprocess.Popen(gate_argv(request))
    try:
        code = child.wait()
    except KeyboardInterrupt:
        # Ctrl-C reached the child too: let pytest end the gate and write what it has.
        try:
            child.wait(timeout=SUITE_GRACE_S)
        except subprocess.TimeoutExpired:
            child.terminate()
            child.wait()
        raise
    return attempt_from_store(request, code)


@dataclass
class Stop:
    """Why the checklist run stopped at a gate, and its exit code."""

    gate: str
    exit_code: int
    attempt: GateAttempt | None = None  # None: a manual item failed
    failed: list[ChecklistAnswer] = field(default_factory=list)


@dataclass
class ChecklistFlow:
    """One checklist run: the gates in order, each answer stored the moment it is given."""

    checklist: Checklist
    answers: ChecklistStore
    run: ChecklistRun
    asker: Asker
    run_gate: GateRunner
    console: Console
    request: GateRequest  # the template: site, thresholds, out and pytest arguments
    operator: str = ""
    new_run_id: Callable[[], str] = field(default=lambda: "")

    def gate(self, gate: str) -> Stop | None:
        """Ask the gate's open items, then run its suite; a Stop when the run must end here."""
        if gate in self.answers.passed(self.run.checklist_id):
            self.console.print(f"{gate.upper()}: passed earlier in this checklist run, skipped")
            return None
        failed = [a for a in self.ask(gate) if a.answer == "fail"]
        if failed:
            return Stop(gate, EXIT_CODES[Outcome.FAIL], failed=failed)
        self.console.rule(f"{gate.upper()} automated suite")
        request = GateRequest(gate, self.new_run_id(), self.run.checklist_id,
                              self.request.site, self.request.thresholds, self.request.out,
                              self.request.pytest_args)
        attempt = self.run_gate(request)
        self.answers.add_attempt(self.run.checklist_id, attempt)
        return None if attempt.verdict is Outcome.PASS else Stop(gate, attempt.exit_code,
                                                                  attempt)

    def ask(self, gate: str) -> list[ChecklistAnswer]:
        """Every answer of the gate: earlier ones as stored, the open items asked now."""
        cid = self.run.checklist_id
        done = {a.item_id: a for a in self.answers.answers(cid, gate)}
        items = self.checklist.items(gate)
        if done:
            self.console.print(f"{gate.upper()}: {len(done)} item(s) answered earlier, kept")
        for number, item in enumerate(items, 1):
            if full_id(gate, item) in done:
                continue
            answer, note = self.asker.answer(gate, item, f"{number}/{len(items)}")
            found = ChecklistAnswer(gate=gate, item_id=full_id(gate, item), text=item.question,
                                    answer=answer, note=note, operator=self.operator,
                                    answered_at=utc_now())
            self.answers.save(cid, found)
            done[found.item_id] = found
        return list(done.values())

    def run_all(self, gates: list[str]) -> Stop | None:
        """The gates in chain order; the first Stop ends the run."""
        for gate in gates:
            stop = self.gate(gate)
            if stop is not None:
                return stop
        return None
