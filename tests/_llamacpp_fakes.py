"""A stand-in llama.cpp install, as `kvgate engine install llamacpp` leaves one."""

from pathlib import Path

from gates.engines.llamacpp import LlamaCppInstall
from gates.engines.llamacpp.installer import CMAKE_FLAGS, MANIFEST, PINNED, install_dir


def fake_install(root: Path) -> LlamaCppInstall:
    """An install.json with a stand-in executable and model, as the installer leaves them."""
    home = install_dir(PINNED, root)
    (home / "bin").mkdir(parents=True)
    server = home / "bin" / "llama-server"
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    (home / "m.gguf").write_bytes(b"GGUF")
    found = LlamaCppInstall(version=PINNED, directory=home, server=server,
                            model=home / "m.gguf", server_version="version: 1 (abc)",
                            cmake_flags=CMAKE_FLAGS)
    (home / MANIFEST).write_text(found.model_dump_json())
    return found
