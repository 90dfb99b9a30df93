"""The on-site checklist: manual items per gate, their answers in the store, the guided run."""

from .cli import (
    add_checklist_commands,
    checklist_command,
)
from .items import (
    AnswersFile,
    ChecklistItem,
    answer_problems,
    load_answers,
    load_checklist,
    parse_gates,
    tally,
)
from .run import (
    ChecklistFlow,
    GateRequest,
    PromptAsker,
    attempt_from_store,
    gate_argv,
)
from .store import (
    ChecklistRun,
    ChecklistStore,
    GateAttempt,
)

__all__ = [
    "AnswersFile",
    "ChecklistFlow",
    "ChecklistItem",
    "ChecklistRun",
    "ChecklistStore",
    "GateAttempt",
    "GateRequest",
    "PromptAsker",
    "add_checklist_commands",
    "answer_problems",
    "attempt_from_store",
    "checklist_command",
    "gate_argv",
    "load_answers",
    "load_checklist",
    "parse_gates",
    "tally",
]
