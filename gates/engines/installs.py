"""What every engine install shares: the cache it lives in, its error, one logged step."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


class InstallError(Exception):
    """An install step failed; the message names the step, the command and its log."""


def cache_root() -> Path:
    """Where kvgate keeps engines: $KVGATE_CACHE, else $XDG_CACHE_HOME/kvgate, else ~/.cache."""
    if os.environ.get("KVGATE_CACHE"):
        return Path(os.environ["KVGATE_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kvgate"


def run_step(step: str, argv: list[str], log: Path, cwd: Path | None = None,
             env: dict[str, str] | None = None, retry: str = "") -> None:
    """Run one install step with its output appended to log; InstallError names the step."""
    with open(log, "ab") as out:
        out.write(f"\n=== {step}: {' '.join(argv)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, check=False, env=env)
        except OSError as exc:
            raise InstallError(f"{step}: cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        again = f"\nto retry: {retry}" if retry else ""
        raise InstallError(f"{step} failed (exit {done.returncode}): {' '.join(argv)}{again}\n"
                           f"--- last lines of {log} ---\n{tail}")


def short_of_space(home: Path, need: int) -> str:
    """What is missing when the filesystem home will be on has less than need bytes free."""
    probe = home
    while not probe.exists():  # home is made by the install: ask the filesystem it will be on
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    return "" if free >= need else (f"{need / 1024**3:.0f} GiB free in {probe} (it has "
                                    f"{free / 1024**3:.1f} GiB; KVGATE_CACHE moves the cache)")
