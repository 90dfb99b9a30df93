"""Mounting and unmounting the fault filesystem from a test: its own process, always unmounted."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from .control import request
from .faults import Fault

INSTALL = ("apt-get install fuse3 (libfuse3 and fusermount3), then pip install mfusepy "
           "(`make test` does both as root)")
HERE = Path(__file__).resolve().parent


def missing() -> str:
    """Why a fault filesystem cannot be mounted here, and how to fix it; "" if it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (the kernel's FUSE module, or the container's device)"
    if shutil.which("fusermount3") is None:
        return f"fusermount3 is not installed: {INSTALL}"
    if importlib.util.find_spec("mfusepy") is None:
        return f"the mfusepy package is not installed: {INSTALL}"
    try:
        import mfusepy  # noqa: F401  (loads libfuse; raises if the library is absent)
    except OSError as exc:
        return f"mfusepy cannot load libfuse ({exc}): {INSTALL}"
    return ""


class FaultFS:
    """A mounted fault filesystem: ``mountpoint`` serves ``backing``; set faults by command."""

    def __init__(self, backing: Path, mountpoint: Path, socket: Path,
                 process: subprocess.Popen, log: Path):
        self.backing, self.mountpoint, self.socket = backing, mountpoint, socket
        self.process, self.log = process, log

    def set(self, *faults: Fault) -> None:
        """Put these rules in force (replacing any before); they apply once this returns."""
        request(self.socket, {"set": [asdict(f) for f in faults]})

    def clear(self) -> None:
        """No faults from now on."""
        request(self.socket, {"clear": True})

    def stats(self) -> dict:
        """Reads and writes seen, and per rule how many operations it matched and fired on."""
        return request(self.socket, {"stats": True})


@contextlib.contextmanager
def mounted(root: Path, cached: bool = False, timeout: float = 20.0) -> Iterator[FaultFS]:
    """Mount a fault filesystem over ``root/backing`` at ``root/mnt`` for the ``with`` block.

    The FUSE server runs as ``python -m faultfs`` in a process of its own (a stall or a crash in
    it cannot take the test down); the mount is gone afterwards, whatever happened.
    """
    backing, mountpoint, socket, log = (root / "backing", root / "mnt", root / "control.sock",
                                        root / "faultfs.log")
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE.parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "faultfs", str(backing), str(mountpoint), str(socket),
             *(["--cached"] if cached else [])], stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
    try:
        _wait_mounted(process, mountpoint, socket, log, timeout)
        yield FaultFS(backing, mountpoint, socket, process, log)
    finally:
        unmount(mountpoint, process)


def _wait_mounted(process: subprocess.Popen, mountpoint: Path, socket: Path, log: Path,
                  timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not (os.path.ismount(mountpoint) and socket.exists()):
        if process.poll() is not None:
            raise RuntimeError(f"faultfs exited {process.returncode} before mounting: "
                               f"{log.read_text(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"faultfs did not mount {mountpoint} within {timeout:g} s")
        time.sleep(0.05)


def unmount(mountpoint: Path, process: subprocess.Popen) -> None:
    """fusermount3 -u; if the mount is busy, a lazy unmount; then the server is ended.

    After a lazy unmount the server would wait for the last open file to close: it is killed
    then, and what still holds a file sees ENOTCONN, as after a storage path lost.
    """
    lazy = False
    for flags in ("-u", "-uz"):
        if not os.path.ismount(mountpoint):
            break
        lazy = flags == "-uz"
        subprocess.run(["fusermount3", flags, str(mountpoint)], capture_output=True, timeout=30)
    try:
        process.wait(timeout=2 if lazy else 10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: only the server and its own
        process.wait(timeout=10)
