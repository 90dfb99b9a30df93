"""Helpers for tests that need real mounts and loop devices: root only, always cleaned up."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _run(*argv: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)


def need_root(*tools: str) -> None:
    """Skip the calling test, with the reason, unless we are root and the tools exist."""
    if os.geteuid() != 0:
        pytest.skip("needs root: mounts and loop devices")
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} on PATH")


@contextmanager
def mounted(source: str, mountpoint: Path, *options: str) -> Iterator[Path]:
    """Mount source at mountpoint (``mount OPTIONS SOURCE MOUNTPOINT``); unmount afterwards."""
    need_root("mount", "umount")
    mountpoint.mkdir(parents=True, exist_ok=True)
    done = _run("mount", *options, source, mountpoint)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip() or done.returncode}")
    try:
        yield mountpoint
    finally:
        if _run("umount", mountpoint).returncode != 0:
            _run("umount", "-l", mountpoint)


@contextmanager
def tmpfs(mountpoint: Path, options: str) -> Iterator[Path]:
    """A tmpfs with the given -o options, e.g. "size=8M" or "ro"."""
    with mounted("tmpfs", mountpoint, "-t", "tmpfs", "-o", options) as path:
        yield path


@contextmanager
def loop_device(image: Path, size: int, sector_size: int | None = None) -> Iterator[str]:
    """A sparse image file of size bytes attached to a free loop device (with that logical
    sector size, losetup --sector-size); detached afterwards."""
    need_root("losetup")
    with image.open("wb") as handle:
        handle.truncate(size)
    sector = ["--sector-size", str(sector_size)] if sector_size else []
    done = _run("losetup", *sector, "--find", "--show", image)
    if done.returncode != 0:
        pytest.skip(f"losetup does not work here: {done.stderr.strip() or done.returncode}")
    device = done.stdout.strip()
    try:
        yield device
    finally:
        _run("losetup", "-d", device)


def mkfs_xfs(device: str, *options: str) -> None:
    """Make an XFS filesystem on device; fails the test if mkfs.xfs fails."""
    done = _run("mkfs.xfs", "-q", "-f", *options, device)
    assert done.returncode == 0, f"mkfs.xfs failed: {done.stderr}"
