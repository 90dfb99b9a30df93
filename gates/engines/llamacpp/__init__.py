"""llama.cpp: install (build from PyPI source), the tiny model, the slot client, cold recovery."""

from .cold import run_slot_cold_recovery
from .installer import PINNED, InstallError, LlamaCppInstall, cache_root, find_install, install

__all__ = [
    "InstallError",
    "LlamaCppInstall",
    "PINNED",
    "cache_root",
    "find_install",
    "install",
    "run_slot_cold_recovery",
]
