"""Linux md RAID: mdadm --detail, mdadm --detail --export, /proc/mdstat, sysfs md/chunk_size.

Pure: parsers take the text and return an MdArray (or MdstatArray); ParseError names the command.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from .blockdev import ParseError, is_number

SIZE_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


class MdMember(BaseModel):
    """One member device and its role: a slot number, or spare / faulty / removed."""

    device: str
    slot: int | None = None
    state: str = ""  # "active sync", "faulty", "spare", "removed", "in_sync"…

    @property
    def failed(self) -> bool:
        """Whether this member has failed or is missing from its slot."""
        return any(w in self.state for w in ("faulty", "removed", "missing"))


class MdArray(BaseModel):
    """What the md layer says about one array; None where the source does not tell."""

    device: str = ""
    level: str = ""  # "raid0", "raid5"…
    raid_devices: int | None = None
    active: int | None = None
    failed_count: int | None = None
    spare_count: int | None = None
    state: str = ""  # mdadm's words: "clean", "active", "clean, degraded"…
    chunk: int | None = None  # bytes
    size: int | None = None  # bytes
    uuid: str = ""
    members: list[MdMember] = Field(default_factory=list)

    @property
    def level_number(self) -> int | None:
        """0 for raid0, 5 for raid5…; None for linear, container and the like."""
        match = re.fullmatch(r"raid(\d+)", self.level)
        return int(match.group(1)) if match else None

    @property
    def failed_members(self) -> list[MdMember]:
        """Members that failed or are missing."""
        return [m for m in self.members if m.failed]

    @property
    def degraded(self) -> bool:
        """Fewer working members than slots, a failed member, or mdadm says so."""
        short = (self.raid_devices is not None and self.active is not None
                 and self.active < self.raid_devices)
        return (short or bool(self.failed_count) or bool(self.failed_members)
                or any(w in self.state for w in ("degraded", "FAILED", "inactive")))


def data_disks(level: int, members: int) -> int:
    """Disks that hold data in one stripe: RAID0 all, RAID5 one less, RAID6 two less."""
    parity = {0: 0, 4: 1, 5: 1, 6: 2}
    if level == 10:
        return max(members // 2, 1)  # near-2 layout: every chunk is written twice
    if level == 1:
        return 1
    if level not in parity:
        raise ValueError(f"no data-disk rule for RAID level {level}")
    return max(members - parity[level], 1)


def _size(text: str, command: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text)
    if not match:
        raise ParseError(command, f"chunk size {text!r} is not a size like 512K")
    return int(match.group(1)) * SIZE_SUFFIX[match.group(2)]


def parse_mdadm_detail(text: str, command: str = "mdadm --detail") -> MdArray:
    """The array in ``mdadm --detail DEVICE`` (the human-readable form)."""
    fields: dict[str, str] = {}
    members: list[MdMember] = []
    device = ""
    in_table = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if not device and line.rstrip().endswith(":") and line.startswith("/"):
            device = line.strip()[:-1]
            continue
        if re.match(r"\s*Number\s+Major\s+Minor\s+RaidDevice", line):
            in_table = True
            continue
        if in_table:
            # "   0   7   0   0   active sync   /dev/loop0" or "   -   0   0   2   removed"
            parts = line.split()
            if len(parts) < 5 or not all(re.fullmatch(r"-|\d+", p) for p in parts[:4]):
                raise ParseError(command, f"unexpected device line {line.strip()!r}")
            has_path = parts[-1].startswith("/")
            state = " ".join(parts[4:-1] if has_path else parts[4:])
            slot = None if parts[3] == "-" else int(parts[3])
            members.append(MdMember(device=parts[-1] if has_path else "", slot=slot,
                                    state=state))
            continue
        key, sep, value = line.partition(" : ")
        if sep:
            fields[key.strip()] = value.strip()
    if "Raid Level" not in fields:
        raise ParseError(command, "no 'Raid Level' line")

    def number(key: str) -> int | None:
        value = fields.get(key)
        if value is None:
            return None
        match = re.match(r"(\d+)", value)
        if not match:
            raise ParseError(command, f"{key!r} is not a number: {value!r}")
        return int(match.group(1))

    size_kib = number("Array Size")
    chunk = fields.get("Chunk Size")
    return MdArray(
        device=device, level=fields["Raid Level"], raid_devices=number("Raid Devices"),
        active=number("Active Devices"), failed_count=number("Failed Devices"),
        spare_count=number("Spare Devices"), state=fields.get("State", ""),
        chunk=_size(chunk, command) if chunk else None,
        # mdadm prints the array size in KiB ("258048 (252.00 MiB 264.24 MB)").
        size=size_kib * 1024 if size_kib is not None else None,
        uuid=fields.get("UUID", ""), members=members)


def parse_mdadm_export(text: str, command: str = "mdadm --detail --export") -> MdArray:
    """The array in ``mdadm --detail --export`` (KEY=value lines; no state, no chunk)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_]+", key.strip()):
            raise ParseError(command, f"line {line.strip()[:60]!r} is not KEY=value")
        values[key.strip()] = value.strip()
    if "MD_LEVEL" not in values:
        raise ParseError(command, "no MD_LEVEL")
    roles: dict[str, str] = {}
    paths: dict[str, str] = {}
    for key, value in values.items():
        match = re.fullmatch(r"MD_DEVICE_(.+)_(ROLE|DEV)", key)
        if match:
            (roles if match.group(2) == "ROLE" else paths)[match.group(1)] = value
    members = []
    for name, role in roles.items():
        slot = int(role) if is_number(role) else None
        members.append(MdMember(device=paths.get(name, name), slot=slot,
                                state="active" if slot is not None else role))
    devices = values.get("MD_DEVICES", "")
    if devices and not is_number(devices):
        raise ParseError(command, f"MD_DEVICES is not a number: {devices!r}")
    return MdArray(device=values.get("MD_DEVNAME", ""), level=values["MD_LEVEL"],
                   raid_devices=int(devices) if devices else None,
                   uuid=values.get("MD_UUID", ""), members=members,
                   failed_count=sum(m.failed for m in members) if members else None)


class MdstatArray(BaseModel):
    """One array's entry in /proc/mdstat."""

    name: str
    active: bool
    level: str = ""
    members: list[MdMember] = Field(default_factory=list)
    blocks: int | None = None  # KiB
    chunk: int | None = None  # bytes
    raid_devices: int | None = None  # the n of "[n/m]"
    working: int | None = None  # the m of "[n/m]"
    map: str = ""  # "UU_U": '_' marks a missing member


_MDSTAT_HEAD = re.compile(r"^(md\w+)\s*:\s*(active|inactive)(?:\s+\((?:auto-)?read-only\))?"
                          r"(?:\s+(\w+)(?![\w\[]))?\s*(.*)$")


def parse_mdstat(text: str, command: str = "cat /proc/mdstat") -> list[MdstatArray]:
    """Every array in /proc/mdstat, with its members, chunk and [n/m] [UU_U] status."""
    if "Personalities" not in text:
        raise ParseError(command, "no 'Personalities' line: not /proc/mdstat")
    arrays: list[MdstatArray] = []
    for line in text.splitlines():
        head = _MDSTAT_HEAD.match(line)
        if head:
            name, state, level, rest = head.groups()
            members = []
            for item in rest.split():
                match = re.fullmatch(r"(\S+?)\[(\d+)\]((?:\([A-Z]\))*)", item)
                if not match:
                    raise ParseError(command, f"member {item!r} of {name} is not dev[n]")
                flags = match.group(3)
                role = ("faulty" if "(F)" in flags else "spare" if "(S)" in flags
                        else "journal" if "(J)" in flags else "active")
                members.append(MdMember(device=match.group(1), slot=int(match.group(2)),
                                        state=role))
            arrays.append(MdstatArray(name=name, active=state == "active", level=level or "",
                                      members=members))
            continue
        if arrays and line.startswith((" ", "\t")):
            current = arrays[-1]
            if (m := re.match(r"\s*(\d+) blocks", line)) and current.blocks is None:
                current.blocks = int(m.group(1))
            if m := re.search(r"(\d+)k chunks?", line):
                current.chunk = int(m.group(1)) * 1024
            if m := re.search(r"\[(\d+)/(\d+)\]\s*\[([U_]*)\]", line):
                current.raid_devices, current.working = int(m.group(1)), int(m.group(2))
                current.map = m.group(3)
    return arrays


def parse_chunk_size(text: str, command: str = "cat /sys/block/mdX/md/chunk_size") -> int:
    """sysfs md/chunk_size: the chunk in bytes (0 for levels without chunks)."""
    value = text.strip()
    if not is_number(value):
        raise ParseError(command, f"{value[:40]!r} is not a number of bytes")
    return int(value)
