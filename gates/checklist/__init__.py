"""The on-site checklist: manual items per gate, their answers in the store, the guided run."""

from .cli import add_checklist_commands, checklist_command
from .store import ChecklistStore, unknown_checklist

__all__ = [
    "ChecklistStore",
    "add_checklist_commands",
    "checklist_command",
    "unknown_checklist",
]
