"""Safety at the target: fio writes only under the target directory, raw devices need consent."""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..core.configuration import Target, real_path
from ..core.quantities import format_size


class TargetError(Exception):
    """The target cannot be used; nothing has been written to it."""


# Characters fio gives a meaning in a job file: ':' separates several files (filename=) or
# several directories (directory=), '\' escapes, '$' expands ${ENV} and $keywords, and a line
# break would start a new option. Any of them could send fio's I/O outside the target.
_FIO_SPECIAL = re.compile(r"[:$\\\x00-\x1f\x7f]")


def vet_filenames(names: set[str]) -> None:
    """Every file fio creates must be a plain name inside the target directory."""
    for name in names:
        if (not name or "/" in name or name.strip() in ("", ".", "..")
                or _FIO_SPECIAL.search(name)):
            raise TargetError(f"refusing fio file name {name!r}: it would leave the target "
                              "directory")


def vet_directory(directory: Path) -> None:
    """The target directory must reach fio's directory= option unchanged."""
    if _FIO_SPECIAL.search(str(directory)):
        raise TargetError(f"refusing target directory {str(directory)!r}: fio would read ':', "
                          "'$', '\\' or control characters in it as syntax and could write "
                          "elsewhere (site.toml [target] directory)")


def _allocated(st: os.stat_result) -> int:
    """Bytes a file really occupies: a sparse file frees only its allocated blocks."""
    return min(st.st_size, st.st_blocks * 512)


def ensure_directory(target: Target) -> Path:
    """The target directory, created when it is missing and ``create = true`` allows it, as
    the real path it leads to."""
    directory = target.directory
    vet_directory(directory)
    if not directory.exists():
        if directory.is_symlink():
            raise TargetError(f"target directory {directory} is a dangling symbolic link "
                              "(site.toml [target] directory)")
        if not target.create:
            raise TargetError(f"target directory {directory} does not exist (site.toml "
                              "[target] directory; set create = true to let kvgate make it)")
        if not directory.parent.is_dir():
            raise TargetError(f"cannot create target directory {directory}: its parent "
                              f"{directory.parent} does not exist")
        try:
            directory.mkdir()
        except OSError as exc:
            raise TargetError(f"cannot create target directory {directory}: "
                              f"{exc.strerror or exc}") from None
    if not directory.is_dir():
        raise TargetError(f"target {directory} is not a directory (site.toml [target] directory)")
    # fio refuses a symbolic link as directory= ("is not a directory": it lstats the path), so
    # every tool is handed where the link leads, vetted again there.
    real = real_path(directory)
    vet_directory(real)
    return real


def check_directory(target: Target, needed: int, ours: set[str]) -> Path:
    """The target directory, checked to exist (or be created), be writable and have room.

    ``needed`` is the space for all of ``ours`` together; files of an earlier run with those
    names count as reusable space, each up to its share of ``needed``.
    """
    directory = ensure_directory(target)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise TargetError(f"target directory {directory} is not writable by this user")
    share = needed // len(ours) if ours else 0
    reusable = 0
    for name in sorted(ours):
        try:
            st = (directory / name).lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            # fio follows symbolic links and opens devices: a link named like our file could
            # aim fio's writes at anything on the machine.
            raise TargetError(f"{directory / name} exists and is not a regular file; kvgate "
                              "writes only its own plain files (remove it first)")
        reusable += min(_allocated(st), share)
    free = shutil.disk_usage(directory).free + reusable
    if free < needed + target.min_free:
        raise TargetError(
            f"target directory {directory} has {format_size(free)} free; the G1 job set needs "
            f"{format_size(needed)} plus min_free {format_size(target.min_free)} "
            "(site.toml [fio] file_size, [target] min_free)")
    return directory


def foreign_filesystem(path: Path, target: Path) -> str:
    """Why path is not on the target's filesystem ("" when it is): the KV must live there."""
    existing = path = real_path(path)  # "kv/x/../y" is kv/y, wherever x leads
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # a kv_dir kvgate will create: judge the folder it goes in
    try:
        mine, theirs = os.stat(existing).st_dev, os.stat(target).st_dev
    except OSError as exc:
        return f"cannot stat {existing} or {target}: {exc.strerror}"
    if mine == theirs:
        return ""
    return (f"{path} is on another filesystem (device {os.major(mine)}:{os.minor(mine)}) than "
            f"the target {target} (device {os.major(theirs)}:{os.minor(theirs)}): the "
            "candidate's KV must live on the storage under test (kv_root may add a path, "
            "never another filesystem)")


def watched_device(path: Path, sysfs: Path = Path("/sys/dev/block")) -> tuple[str, str]:
    """(kernel name, "") of the block device whose I/O counters show who else uses the target
    at ``path`` (a partition's whole disk: its other partitions contend too), or ("", why not).
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        return "", f"cannot stat {path}: {exc.strerror or exc}"
    number = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    node = sysfs / f"{os.major(number)}:{os.minor(number)}"
    if not node.exists():
        return "", (f"{path} is on no local block device (device {os.major(number)}:"
                    f"{os.minor(number)}: tmpfs, overlay, NFS or the like)")
    real = node.resolve()
    return (real.parent if (real / "partition").exists() else real).name, ""


def device_bytes(name: str, sysfs: Path = Path("/sys/class/block")) -> tuple[int, int] | None:
    """Bytes read and written by a block device since boot (sysfs ``stat``), or None."""
    try:
        fields = (sysfs / name / "stat").read_text().split()
        return int(fields[2]) * 512, int(fields[6]) * 512  # sectors: always 512 bytes here
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class DeviceFacts:
    """What the system says about a block device before we would write to it."""

    path: str
    is_block: bool
    serial: str = ""
    mounted_at: list[str] = field(default_factory=list)
    # Other users of the device: RAID/LVM/dm holders, active swap. Also always refused.
    used_by: list[str] = field(default_factory=list)


def raw_device_refusal(facts: DeviceFacts, destructive: bool, typed_serial: str) -> str:
    """Why writing to this raw device is refused, or "" when every condition is met."""
    if not facts.is_block:
        return f"{facts.path} is not a block device"
    if facts.mounted_at:
        return (f"{facts.path} holds a mounted filesystem ({', '.join(facts.mounted_at)}); "
                "kvgate never writes to a mounted device")
    if facts.used_by:
        return (f"{facts.path} is in use ({', '.join(facts.used_by)}); kvgate never writes to "
                "a device another layer is using")
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
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def _vpd_serial(path: Path) -> str:
    """The unit serial number from a SCSI VPD page 0x80 (SATA and SAS disks)."""
    try:
        page = path.read_bytes()
    except OSError:
        return ""
    if len(page) < 4 or page[1] != 0x80:
        return ""
    length = int.from_bytes(page[2:4], "big")
    return page[4:4 + length].decode("ascii", "replace").strip(" \x00")


def _serial(disk: Path) -> str:
    for rel in ("device/serial", "serial", "device/device/serial"):
        if found := _read(disk / rel):
            return found
    return _vpd_serial(disk / "device/vpd_pg80")


def _unescape(text: str) -> str:
    """/proc mount tables write space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def device_facts(path: str, sysfs: Path = Path("/sys/class/block"),
                 mountinfo: Path = Path("/proc/self/mountinfo"),
                 swaps: Path = Path("/proc/swaps")) -> DeviceFacts:
    """Collect the device's type, serial, mounts and other users (its own and its partitions')."""
    real = os.path.realpath(path)
    name = os.path.basename(real)
    is_block = os.path.exists(real) and Path(real).is_block_device()
    node = sysfs / name
    parts = {name} | {p.name for p in node.glob(f"{name}*") if (p / "partition").exists()}
    numbers = {_read(sysfs / p / "dev") for p in parts} - {""}
    if is_block:
        rdev = os.stat(real).st_rdev
        numbers.add(f"{os.major(rdev)}:{os.minor(rdev)}")
    # A partition has no serial of its own: it is the disk's.
    disk = node.resolve().parent if (node / "partition").exists() else node
    serial = _serial(disk)

    def ours(source: str) -> bool:
        return os.path.basename(os.path.realpath(source)) in parts

    mounted = []
    for line in _read(mountinfo).splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        source = _unescape(fields[dash + 2]) if len(fields) > dash + 2 else ""
        # The device number catches mounts whose source name differs (/dev/root, by-uuid).
        if fields[2] in numbers or (source.startswith("/dev/") and ours(source)):
            mounted.append(_unescape(fields[4]))
    used = [f"held by {h.name}" for p in sorted(parts) for h in sorted(
        (sysfs / p / "holders").glob("*"))]
    for line in _read(swaps).splitlines()[1:]:
        source, kind = ([_unescape(f) for f in line.split()] + ["", ""])[:2]
        if kind == "partition" and ours(source):  # a swap *file* lives on a mounted fs
            used.append(f"active swap {source}")
    return DeviceFacts(path=path, is_block=is_block, serial=serial, mounted_at=mounted,
                       used_by=used)


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
