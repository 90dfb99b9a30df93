"""The on-site checklist: manual items per gate from checklist.toml, and answers files."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..core.configuration import read_document, validate
from ..core.verdicts import GATES, ChecklistAnswer

Answer = Literal["pass", "fail", "n.a."]
ANSWERS: tuple[Answer, ...] = ("pass", "fail", "n.a.")
ITEM_ID = r"^[a-z0-9][a-z0-9-]*$"


class ChecklistItem(BaseModel):
    """One manual check the engineer answers pass, fail or n.a. before a gate's suite runs."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=ITEM_ID, description="stable id within its gate, e.g. serials-match-po")
    question: str = Field(min_length=1)
    hint: str = ""  # where to look
    note_on_fail: bool = True  # a "fail" answer must say why


class ChecklistMeta(BaseModel):
    """The checklist's title and revision, cited in the checklist run's state."""

    model_config = ConfigDict(extra="forbid")

    title: str = "On-site acceptance checklist"
    revision: str = Field(min_length=1)


class Checklist(BaseModel):
    """The manual items of every gate, in the order they are asked."""

    model_config = ConfigDict(extra="forbid")

    meta: ChecklistMeta
    g1: list[ChecklistItem] = Field(default_factory=list)
    g2: list[ChecklistItem] = Field(default_factory=list)
    g3: list[ChecklistItem] = Field(default_factory=list)
    g4: list[ChecklistItem] = Field(default_factory=list)

    @field_validator("g1", "g2", "g3", "g4")
    @classmethod
    def _unique_ids(cls, items: list[ChecklistItem]) -> list[ChecklistItem]:
        ids = [item.id for item in items]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"item id {', '.join(map(repr, twice))} used more than once")
        return items

    def items(self, gate: str) -> list[ChecklistItem]:
        """The manual items of one gate."""
        return getattr(self, gate)

    def item_ids(self, gates: list[str] | tuple[str, ...] = GATES) -> list[str]:
        """Full item ids ("g1.serials-match-po") of the given gates, in asking order."""
        return [full_id(g, item) for g in gates for item in self.items(g)]


def full_id(gate: str, item: ChecklistItem) -> str:
    """The item's id as stored and as written in answers files: gate, dot, id."""
    return f"{gate}.{item.id}"


class GivenAnswer(BaseModel):
    """One item's answer in an answers file."""

    model_config = ConfigDict(extra="forbid")

    answer: Answer
    note: str = ""


class AnswersFile(BaseModel):
    """A non-interactive run's answers: who answers, and per full item id the answer."""

    model_config = ConfigDict(extra="forbid")

    operator: str = Field(min_length=1)
    answers: dict[str, GivenAnswer] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # `"g1.firmware-recorded" = "pass"` is short for `{ answer = "pass" }`.
        if isinstance(data, dict) and isinstance(data.get("answers"), dict):
            data = {**data, "answers": {k: {"answer": v} if isinstance(v, str) else v
                                        for k, v in data["answers"].items()}}
        return data

    @field_validator("operator")
    @classmethod
    def _named(cls, operator: str) -> str:
        if not operator.strip():
            raise ValueError("the operator's name must not be blank")
        return operator.strip()


def load_checklist(path: Path | str) -> tuple[Checklist, str]:
    """Read and validate a checklist file; returns it with the file's SHA-256."""
    path = Path(path)
    data, sha = read_document(path)
    return validate(Checklist, data, path), sha


def load_answers(path: Path | str) -> AnswersFile:
    """Read and validate an answers file (TOML, or JSON by its .json suffix)."""
    path = Path(path)
    return validate(AnswersFile, read_document(path)[0], path)


def parse_gates(text: str) -> list[str]:
    """"g1,g3" as gates in chain order; an unknown name is a ValueError with a hint."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    for name in names:
        if name not in GATES:
            close = difflib.get_close_matches(name, GATES, n=1)
            hint = f" — did you mean '{close[0]}'?" if close else ""
            raise ValueError(f"--gates: unknown gate '{name}'{hint} (gates: {', '.join(GATES)})")
    if not names:
        raise ValueError(f"--gates: name at least one of {', '.join(GATES)}")
    return [g for g in GATES if g in names]


def answer_problems(checklist: Checklist, given: AnswersFile, gates: list[str],
                    answered: set[str]) -> list[str]:
    """What keeps an answers file from answering every open item of these gates ([] if none)."""
    known = checklist.item_ids()
    needed = [i for i in checklist.item_ids(gates) if i not in answered]
    missing = [i for i in needed if i not in given.answers]
    problems = [f"no answer for {', '.join(missing)} (every item of the gates "
                f"{', '.join(gates)} needs one)"] if missing else []
    for item_id in given.answers:
        if item_id not in known:
            close = difflib.get_close_matches(item_id, known, n=1, cutoff=0.6)
            hint = f" — did you mean '{close[0]}'?" if close else ""
            problems.append(f"unknown item id '{item_id}' in [answers]{hint}")
    notes = {full_id(g, i): i.note_on_fail for g in gates for i in checklist.items(g)}
    problems += [f"key 'answers.{i}': answered fail without a note; this item needs one"
                 for i in needed if i in given.answers and notes[i]
                 and given.answers[i].answer == "fail" and not given.answers[i].note.strip()]
    return problems


def tally(answers: list[ChecklistAnswer]) -> str:
    """"3 pass, 1 n.a." for a gate's answers ("none" when there are none)."""
    counts = {a: sum(x.answer == a for x in answers) for a in ANSWERS}
    return ", ".join(f"{n} {a}" for a, n in counts.items() if n) or "none"
