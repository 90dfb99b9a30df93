"""Mounts and block devices (findmnt -J, lsblk -J -b), and the error every tool parser raises.

Pure: parsers take the tool's text and return typed models.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field


class ParseError(ValueError):
    """A tool's output that could not be read; the message names the command."""

    def __init__(self, command: str, reason: str):
        self.command = command
        super().__init__(f"cannot read the output of `{command}`: {reason}")


def json_document(text: str, command: str) -> Any:
    """The JSON value in a tool's output, or ParseError naming the command."""
    if not text.strip():
        raise ParseError(command, "it printed nothing")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(command, f"not JSON ({exc})") from None


def is_number(text: str) -> bool:
    """Whether text is a plain ASCII whole number ("42"; not "²", "٣" or "4.0")."""
    return re.fullmatch(r"[0-9]+", text) is not None


def as_int(value: Any, command: str, field: str) -> int | None:
    """An integer field that util-linux and nvme-cli print as a number or as a string."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value.strip())
    raise ParseError(command, f"field {field!r} is not a whole number: {value!r}")


def as_bool(value: Any, command: str, field: str) -> bool | None:
    """A flag printed as true/false (util-linux >= 2.33) or "0"/"1" (older versions)."""
    if value is None or isinstance(value, bool):
        return value
    if value in (0, 1, "0", "1"):
        return bool(int(value))
    raise ParseError(command, f"field {field!r} is not a flag: {value!r}")


def json_object(value: Any, command: str, what: str) -> dict:
    """value if it is a JSON object; a ParseError naming the command otherwise."""
    if not isinstance(value, dict):
        raise ParseError(command, f"{what} is not a JSON object")
    return value


def text_field(value: Any) -> str:
    """A JSON field as stripped text ("" for null)."""
    return "" if value is None else str(value).strip()


# ---- findmnt -J --------------------------------------------------------------------------

class Mount(BaseModel):
    """One mounted filesystem as findmnt describes it."""

    target: str
    source: str
    fstype: str
    options: list[str] = Field(default_factory=list)

    def option(self, name: str) -> bool:
        """Whether the mount has this option (``noatime``, ``rw``…) by name or name=value."""
        return any(o == name or o.startswith(name + "=") for o in self.options)


def parse_findmnt(text: str, command: str = "findmnt -J") -> list[Mount]:
    """Every filesystem in findmnt's JSON, children flattened in order."""
    doc = json_object(json_document(text, command), command, "the output")
    found: list[Mount] = []

    def walk(entries: Any) -> None:
        if not isinstance(entries, list):
            raise ParseError(command, "'filesystems' is not a list")
        for entry in entries:
            entry = json_object(entry, command, "a filesystem entry")
            if not entry.get("target"):
                raise ParseError(command, "a filesystem entry has no 'target'")
            options = text_field(entry.get("options")).split(",")
            found.append(Mount(target=text_field(entry["target"]),
                               source=text_field(entry.get("source")),
                               fstype=text_field(entry.get("fstype")),
                               options=[o for o in options if o]))
            walk(entry.get("children", []))

    if "filesystems" not in doc:
        raise ParseError(command, "no 'filesystems' list")
    walk(doc["filesystems"])
    return found


# ---- lsblk -J -b -------------------------------------------------------------------------

LSBLK_COLUMNS = "NAME,PATH,TYPE,SIZE,ROTA,MIN-IO,OPT-IO,LOG-SEC,PHY-SEC,MODEL,SERIAL,REV"


class BlockDevice(BaseModel):
    """One block device: sizes in bytes, I/O hints, identity, and its children (partitions…)."""

    name: str
    path: str = ""
    type: str = ""
    size: int | None = None
    rotational: bool | None = None
    min_io: int | None = None
    opt_io: int | None = None
    logical_sector: int | None = None
    physical_sector: int | None = None
    model: str = ""
    serial: str = ""
    revision: str = ""
    children: list[BlockDevice] = Field(default_factory=list)

    def walk(self) -> list[BlockDevice]:
        """This device and every descendant, depth first."""
        return [self, *(d for c in self.children for d in c.walk())]


def _device(entry: Any, command: str) -> BlockDevice:
    entry = json_object(entry, command, "a block device entry")
    if not entry.get("name"):
        raise ParseError(command, "a block device entry has no 'name'")
    children = entry.get("children", [])
    if not isinstance(children, list):
        raise ParseError(command, f"'children' of {entry['name']} is not a list")
    name = text_field(entry["name"])
    return BlockDevice(
        name=name, path=text_field(entry.get("path")) or f"/dev/{name}",
        type=text_field(entry.get("type")),
        size=as_int(entry.get("size"), command, "size"),
        rotational=as_bool(entry.get("rota"), command, "rota"),
        min_io=as_int(entry.get("min-io"), command, "min-io"),
        opt_io=as_int(entry.get("opt-io"), command, "opt-io"),
        logical_sector=as_int(entry.get("log-sec"), command, "log-sec"),
        physical_sector=as_int(entry.get("phy-sec"), command, "phy-sec"),
        model=text_field(entry.get("model")), serial=text_field(entry.get("serial")),
        revision=text_field(entry.get("rev")),
        children=[_device(c, command) for c in children])


def parse_lsblk(text: str, command: str = "lsblk -J -b") -> list[BlockDevice]:
    """The device trees in lsblk's JSON; numbers may be JSON numbers or strings."""
    doc = json_object(json_document(text, command), command, "the output")
    devices = doc.get("blockdevices")
    if not isinstance(devices, list):
        raise ParseError(command, "no 'blockdevices' list")
    return [_device(d, command) for d in devices]


def mount_for(mounts: list[Mount], path: str) -> Mount | None:
    """The mount whose target is the longest prefix of path (what holds that file)."""
    def inside(target: str) -> bool:
        return path == target or path.startswith(target.rstrip("/") + "/")

    candidates = [m for m in mounts if inside(m.target)]
    return max(candidates, key=lambda m: len(m.target), default=None)
