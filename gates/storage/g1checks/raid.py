"""G1 checks of the host's md RAID array: level, members, state, failed members, chunk size.

Pure: each check is a CheckSpec run by `_g1check.judge`; the readers below say, in a site
engineer's words, what mdadm reported and what site.toml [topology] ordered.
"""

from __future__ import annotations

from ..raid import MdArray
from .spec import Case, CheckSpec, Reading, Unmeasured, exact, none_of, topology

UNHEALTHY_STATE = ("degraded", "resyncing", "recovering", "reshaping", "FAILED", "inactive",
                   "Not Started")


def _level(c: Case) -> Reading | Unmeasured:
    array, want = c.got, c.want
    if array.level_number is None:
        return Unmeasured(f"mdadm reports level {array.level!r}, not a RAID level")
    return Reading(array.level_number, f"{array.device}: mdadm reports {array.level}; site.toml "
                   f"expects RAID{want}" + ("" if array.level_number == want else
                                            " — the array was built with the wrong level"))


def _members(c: Case) -> Reading:
    array = c.got
    count = array.raid_devices if array.raid_devices is not None else len(array.members)
    devices = ", ".join(m.device for m in array.members if m.device)
    return Reading(count, f"{array.device} has {count} member slots ({devices}); "
                   f"ordered {c.want}")


def _state(c: Case) -> Reading | Unmeasured:
    array = c.got
    problems = [w for w in UNHEALTHY_STATE if w.lower() in array.state.lower()]
    if array.degraded and "degraded" not in problems:
        problems.append("degraded")
    if not array.state and not problems:  # mdadm --detail failed: --export has no State
        return Unmeasured(f"{array.device}: mdadm reported no State (only `mdadm --detail "
                          "--export` answered, which has none), so whether the array is "
                          "clean, resyncing or degraded is unknown")
    note = f"mdadm State: {array.state or 'not reported'}"
    if problems:
        note += (f" — the array is {', '.join(problems)}: it is not running as ordered "
                 "(redundancy and speed are reduced); repair it and re-run G1")
    return Reading(len(problems), note)


def _active(array: MdArray) -> int | None:
    """Members at work: mdadm --detail's count, else the members --export gives a slot."""
    if array.active is not None:
        return array.active
    return sum(m.slot is not None for m in array.members) if array.members else None


def _missing(array: MdArray) -> int | None:
    """Members failed or missing; None when mdadm said neither how many slots the array has
    and how many members work in them, nor of any member that it failed."""
    # mdadm lists a failed drive twice: its empty slot ("removed") and the device ("faulty").
    active = _active(array)
    short = (array.raid_devices - active
             if array.raid_devices is not None and active is not None else None)
    faulty = sum("faulty" in m.state for m in array.members)
    removed = sum("removed" in m.state or "missing" in m.state for m in array.members)
    found = max(short or 0, array.failed_count or 0, faulty, removed)
    return found if short is not None or found else None


def _failed_members(c: Case) -> Reading | Unmeasured:
    array = c.got
    failed = [m for m in array.failed_members if m.device] or array.failed_members
    count = _missing(array)
    if count is None:
        return Unmeasured(f"{array.device}: mdadm said neither how many member slots the "
                          "array has nor how many members work in them")
    named = ", ".join(f"{m.device or f'slot {m.slot}'} ({m.state})" for m in failed)
    return Reading(count, "all members active" if not count else (
        f"{count} member(s) failed or missing" + (f": {named}" if named else "")
        + f"; {array.device} is degraded — replace the drive before acceptance"))


def _chunk(c: Case) -> Reading | Unmeasured:
    chunk = c.got.chunk
    if chunk is None:
        return Unmeasured("neither mdadm nor sysfs reported a chunk size")
    return Reading(chunk / 1024, f"{c.got.device}: chunk {chunk // 1024} KiB")


LEVEL = CheckSpec("RAID level", "raid", _level, exact("", "site.topology.raid_level"),
                  want=topology("raid_level"), unset="site.toml [topology] sets no raid_level")
MEMBERS = CheckSpec("RAID member count", "raid", _members,
                    exact("drives", "site.topology.members"), want=topology("members"),
                    unset="site.toml [topology] sets no members")
STATE = CheckSpec("RAID state", "raid", _state, none_of("problems", "site.topology.raid_level"))
FAILED_MEMBERS = CheckSpec("RAID failed or missing members", "raid", _failed_members,
                           none_of("drives", "site.topology.members"))
CHUNK = CheckSpec("RAID chunk size", "raid", _chunk, exact("KiB", "site.topology.chunk", 1024),
                  want=topology("chunk"), unset="site.toml [topology] sets no chunk")
