"""`kvgate engine`: install a real local inference engine for G2/G3, or say what is installed."""

from __future__ import annotations

import argparse
import os

from rich.console import Console

from ..engines.llamacpp import PINNED, InstallError, cache_root, find_install, install

EXAMPLES = """examples:
  kvgate engine install llamacpp        build llama.cpp's server from PyPI source (~3-4 min, once)
  kvgate engine status                  is it installed, where, which version
  KVGATE_CACHE=/data/cache kvgate engine install llamacpp --jobs 8
"""


def add_engine_commands(commands: argparse._SubParsersAction) -> None:
    """Register `engine` and its subcommands install and status."""
    fmt = argparse.RawDescriptionHelpFormatter
    engine = commands.add_parser(
        "engine", help="install a real local inference engine (llama.cpp) for G2/G3",
        description="Build llama.cpp's llama-server from the source vendored in the "
        "llama-cpp-python sdist on PyPI (CPU only, nothing else downloaded) into "
        f"{cache_root()}/llamacpp/VERSION, and write a tiny random-weight model. The embedded "
        "default's G2/G3 then measure it instead of the simulator.",
        epilog=EXAMPLES, formatter_class=fmt)
    sub = engine.add_subparsers(dest="engine_command", required=True)
    add = sub.add_parser("install", help="build the engine into the cache (reused when present)",
                         epilog=EXAMPLES, formatter_class=fmt)
    add.add_argument("engine", choices=["llamacpp"], help="the engine to install")
    add.add_argument("--version", default=PINNED,
                     help=f"llama-cpp-python release to build from (default {PINNED})")
    add.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                     help="parallel compile jobs (default: the CPU count)")
    add.add_argument("--force", action="store_true", help="rebuild even if installed")
    status = sub.add_parser("status", help="print the installed engine, or how to install it")
    status.add_argument("--version", default=PINNED, help=f"release to look for ({PINNED})")


def engine_command(args: argparse.Namespace) -> int:
    """Run `kvgate engine install|status`; 0 = installed, 1 = not installed, 2 = failed."""
    console = Console(soft_wrap=True, highlight=False)
    if args.engine_command == "status":
        found = find_install(args.version)
        if found is None:
            console.print(f"llama.cpp {args.version} is not installed in {cache_root()}: run "
                          "`kvgate engine install llamacpp` (G2/G3 use the simulator until then)")
            return 1
        console.print(f"{found.describe()}\n  server: {found.server}\n  model:  {found.model} "
                      f"({found.shape.kv_bytes_per_token:,} KV bytes per token)\n  built in "
                      f"{found.build_seconds:.0f} s with {' '.join(found.cmake_flags)}")
        return 0
    if args.jobs < 1:
        console.print(f"[red]--jobs must be at least 1, not {args.jobs}[/]")
        return 2
    try:
        install(args.version, args.jobs, force=args.force, say=console.print)
    except (InstallError, RuntimeError, OSError) as exc:
        Console(stderr=True, soft_wrap=True, highlight=False).print(
            f"[red]engine install failed:[/] {exc}")
        return 2
    return 0
