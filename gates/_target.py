"""Safety at the target: fio writes only under the target directory, raw devices need consent."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ._settings import Target
from ._units import format_size


class TargetError(Exception):
    """The target cannot be used; nothing has been written to it."""


def vet_filenames(names: set[str]) -> None:
    """Every file fio creates must be a plain name inside the target directory."""
    for name in names:
        if not name or "/" in name or name in (".", "..") or "\x00" in name:
            raise TargetError(f"refusing fio file name {name!r}: it would leave the target "
                              "directory")


def check_directory(target: Target, needed: int, ours: set[str]) -> Path:
    """The target directory, checked to exist (or be created), be writable and have room."""
    directory = target.directory
    if not directory.exists():
        if not target.create:
            raise TargetError(f"target directory {directory} does not exist (site.toml "
                              "[target] directory; set create = true to let kvgate make it)")
        if not directory.parent.is_dir():
            raise TargetError(f"cannot create target directory {directory}: its parent "
                              f"{directory.parent} does not exist")
        directory.mkdir()
    if not directory.is_dir():
        raise TargetError(f"target {directory} is not a directory (site.toml [target] directory)")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise TargetError(f"target directory {directory} is not writable by this user")
    reusable = sum((directory / n).stat().st_size for n in ours if (directory / n).is_file())
    free = shutil.disk_usage(directory).free + reusable
    if free < needed + target.min_free:
        raise TargetError(
            f"target directory {directory} has {format_size(free)} free; the G1 job set needs "
            f"{format_size(needed)} plus min_free {format_size(target.min_free)} "
            "(site.toml [fio] file_size, [target] min_free)")
    return directory


@dataclass
class DeviceFacts:
    """What the system says about a block device before we would write to it."""

    path: str
    is_block: bool
    serial: str = ""
    mounted_at: list[str] = field(default_factory=list)


def raw_device_refusal(facts: DeviceFacts, destructive: bool, typed_serial: str) -> str:
    """Why writing to this raw device is refused, or "" when every condition is met."""
    if not facts.is_block:
        return f"{facts.path} is not a block device"
    if facts.mounted_at:
        return (f"{facts.path} holds a mounted filesystem ({', '.join(facts.mounted_at)}); "
                "kvgate never writes to a mounted device")
    if not destructive:
        return (f"{facts.path} is a raw device and fio would overwrite it: pass --destructive "
                "and --confirm-serial SERIAL to allow it")
    if not facts.serial:
        return f"cannot read the serial of {facts.path}, so it cannot be confirmed"
    if typed_serial.strip() != facts.serial:
        return (f"serial typed back ({typed_serial.strip() or 'nothing'}) does not match "
                f"{facts.path}'s serial")
    return ""


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def device_facts(path: str, sysfs: Path = Path("/sys/class/block"),
                 mounts: Path = Path("/proc/mounts")) -> DeviceFacts:
    """Collect the device's type, serial and mounts (its own and its partitions')."""
    real = os.path.realpath(path)
    name = os.path.basename(real)
    is_block = os.path.exists(real) and Path(real).is_block_device()
    node = sysfs / name
    parts = {name} | {p.name for p in node.glob(f"{name}*") if (p / "partition").exists()}
    serial = next(filter(None, (_read(node / rel) for rel in
                                ("device/serial", "serial", "device/device/serial"))), "")
    mounted = []
    for line in _read(mounts).splitlines():
        source, mountpoint = (line.split() + ["", ""])[:2]
        if source.startswith("/dev/") and os.path.basename(os.path.realpath(source)) in parts:
            mounted.append(mountpoint)
    return DeviceFacts(path=path, is_block=is_block, serial=serial, mounted_at=mounted)


def resolve_target(target: Target, needed: int, ours: set[str], destructive: bool,
                   typed_serial: str) -> tuple[Path | None, str]:
    """(directory, "") for a file target, or (None, device) for a confirmed raw device."""
    if not target.device:
        vet_filenames(ours)
        return check_directory(target, needed, ours), ""
    refusal = raw_device_refusal(device_facts(target.device), destructive, typed_serial)
    if refusal:
        raise TargetError(f"refusing [target] device: {refusal}")
    return None, target.device
