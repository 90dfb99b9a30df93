"""A directory on a block device of its own, so other work's disk I/O stays out of the proof.

G3's evidence chain counts the read bytes of the block device under the candidate's KV
directory; on the disk the rest of the machine uses, a pip install or a fio run beside the test
reads hundreds of MB during a 0.1 s probe and that row disagrees. A small ext4 loop device
mounted for the test sees only the test's reads. Root only: elsewhere the directory is on the
shared disk, and a busy disk can still make the block-device row disagree (its note says so).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TOOLS = ("losetup", "mkfs.ext4", "mount", "umount")


def _run(*argv: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)


def _attach(image: Path, size: int) -> str:
    with image.open("wb") as handle:
        handle.truncate(size)
    done = _run("losetup", "--find", "--show", image)
    return done.stdout.strip() if done.returncode == 0 else ""


@contextmanager
def own_disk(mountpoint: Path, size: int = 2**30) -> Iterator[str]:
    """Mount a fresh ext4 loop device at mountpoint if we can; yield what it is on."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    image = mountpoint.with_name(mountpoint.name + ".img")
    device = _attach(image, size) if os.geteuid() == 0 and all(map(shutil.which, TOOLS)) \
        else ""
    # lazy_*_init=0: no background initialisation writing to the device during a probe.
    mounted = bool(device) and _run("mkfs.ext4", "-q", "-F", "-E",
                                    "lazy_itable_init=0,lazy_journal_init=0",
                                    device).returncode == 0 \
        and _run("mount", device, mountpoint).returncode == 0
    try:
        yield f"{device}, a loop device of its own" if mounted else \
            "the shared disk (no loop device: needs root and losetup, mkfs.ext4, mount)"
    finally:
        if mounted and _run("umount", mountpoint).returncode != 0:
            _run("umount", "-l", mountpoint)
        if device:
            _run("losetup", "-d", device)
        image.unlink(missing_ok=True)
