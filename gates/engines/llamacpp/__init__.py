"""llama.cpp: install (build from PyPI source), the tiny model, the slot client, cold recovery."""

from .cold import (
    run_slot_cold_recovery,
    slot_attribution,
    slot_file,
)
from .http import (
    SlotError,
    SlotStream,
    chunk_token_ids,
    parse_slot_result,
    slot_body,
)
from .installer import (
    CMAKE_FLAGS,
    MANIFEST,
    PINNED,
    InstallError,
    LlamaCppInstall,
    cache_root,
    find_install,
    install,
    install_dir,
)
from .model import (
    BYTE_TOKENS,
    CONTROL,
    ModelShape,
    write_tiny_gguf,
)

__all__ = [
    "BYTE_TOKENS",
    "CMAKE_FLAGS",
    "CONTROL",
    "InstallError",
    "LlamaCppInstall",
    "MANIFEST",
    "ModelShape",
    "PINNED",
    "SlotError",
    "SlotStream",
    "cache_root",
    "chunk_token_ids",
    "find_install",
    "install",
    "install_dir",
    "parse_slot_result",
    "run_slot_cold_recovery",
    "slot_attribution",
    "slot_body",
    "slot_file",
    "write_tiny_gguf",
]
