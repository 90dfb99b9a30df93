"""Checks the models make that hold one key against another, in a table or across tables.

Each is a check the run would make too late to help (fio refuses its job, G4 has no figure),
so the models make it once, on the files alone, for `kvgate config check` and the run alike.
The models call these with themselves: this module imports none of them (no import circle),
and what needs both files is gates.core.site_checks'.
"""

from __future__ import annotations

import math
from typing import Any

from ..quantities import format_duration
from ..statistics import ROUNDS


class KeyedError(ValueError):
    """A value refused by a check of its table that holds it against another key.

    pydantic places a table's own check at the table ("fio"); the loader (gates.core.config)
    names the key it refuses instead ("fio.kv_block", key relative to the table), then the
    value as the file wrote it (else ``value``, the one in force), then the message: a
    predicate, "is larger than fio.file_size = ...".
    """

    def __init__(self, key: str, message: str, value: str):
        self.key, self.value = key, value
        super().__init__(message)


# The random-read jobs of G1 (the 4 KiB QD1 latency job and the queue-depth sweep) read 4 KiB
# blocks of the read file (gates.storage.jobs).
SMALL_BLOCK = 4096
# O_DIRECT I/O is in whole logical blocks of the device, 512 bytes at the least: fio's first
# read of any other size fails with EINVAL ("first direct IO errored").
SECTOR_MIN = 512


def fio_problem(fio: Any) -> KeyedError | None:
    """A block fio cannot read from the test file (fio: a FioSettings): too big, off a sector."""
    shown = fio.model_dump(mode="json")
    for key in ("seq_block", "kv_block"):
        if getattr(fio, key) > fio.file_size:
            return KeyedError(key, (
                f'is larger than fio.file_size = "{shown["file_size"]}": fio refuses a job '
                'whose file is smaller than its block ("size too small, must not be less than '
                f'minimum block size"): write a larger file_size or a smaller {key}'),
                f'"{shown[key]}"')
    if fio.file_size < SMALL_BLOCK:
        return KeyedError("file_size", (
            "is smaller than the 4 KiB blocks of G1's random-read jobs (fio: \"size too "
            "small\"): write at least \"4KiB\" (a real site: several times the array's cache)"),
            f'"{shown["file_size"]}"')
    for key in ("seq_block", "kv_block") if fio.direct else ():
        if getattr(fio, key) % SECTOR_MIN:
            return KeyedError(key, (
                "is not a whole number of 512-byte sectors: with direct = true (O_DIRECT) the "
                'kernel refuses the read (EINVAL): write a multiple of 512 bytes, e.g. "256KiB"'),
                f'"{shown[key]}"')
    return None


def site_problem(site: Any) -> KeyedError | None:
    """Tables of a Site that cannot hold together: the sector size, the capacity."""
    shown = site.model_dump(mode="json", include={"fio", "target", "topology"})
    sector = site.topology.sector_size
    if sector and site.fio.direct:
        for key, block in (("fio.seq_block", site.fio.seq_block),
                           ("fio.kv_block", site.fio.kv_block),
                           ("topology.sector_size", SMALL_BLOCK)):
            if block % sector:
                table, name = key.split(".")
                what = "does not divide G1's 4 KiB random-read blocks" if table == "topology" \
                    else (f'is not a whole number of topology.sector_size = '
                          f'"{shown["topology"]["sector_size"]}" sectors')
                return KeyedError(key, (
                    f"{what}: with direct = true (O_DIRECT) the kernel refuses the read "
                    "(EINVAL)"), f'"{shown[table][name]}"')
    capacity = site.topology.capacity
    files = 1 if site.target.device else 2  # gates.storage.jobs: the read and the write file
    if capacity and files * site.fio.file_size + site.target.min_free > capacity:
        return KeyedError("fio.file_size", (
            f'x {files} test file{"s" if files > 1 else ""} plus target.min_free = '
            f'"{shown["target"]["min_free"]}" is more than topology.capacity = '
            f'"{shown["topology"]["capacity"]}", the ordered capacity of the target: '
            f"{'two test files' if files > 1 else 'the test file'} could never fit"),
            f'"{shown["fio"]["file_size"]}"')
    return None


SWEPT_ARMS = ("baseline", "candidate")  # the arms [sweep] gpu_cache and cpu_tier are given to


def sweep_problem(site: Any) -> KeyedError | None:
    """A [sweep] tier the site's arms would not put in force: the sweep would draw it and hold
    the proof to it while the engine ran with its own."""
    shown = site.model_dump(mode="json", include={"sweep"})["sweep"]
    for key in ("gpu_cache", "cpu_tier"):
        if getattr(site.sweep, key) is None:
            continue
        for name in SWEPT_ARMS:
            arm = site.arms.get(name)
            if arm is None:
                continue
            texts = [*arm.command, *arm.env.values()]
            if arm.kind == "launch" and any(f"{{{key}}}" in t for t in texts):
                continue
            why = (f"arms.{name} is someone else's endpoint: its tiers are its operator's; "
                   f"declare them as arms.{name}.{key}" if arm.kind == "endpoint" else
                   f"arms.{name}'s command and env do not pass {{{key}}} to the engine it "
                   "launches: add it, or leave this key out")
            return KeyedError(f"sweep.{key}", (
                f"would be drawn on the sweep's chart and held by its proof while the engine "
                f"ran with its own: {why}"), f'"{shown[key]}"')
    return None


def soak_windows(duration: float, window: float) -> int:
    """Windows a soak commits: a partial last window counts as a whole one (SoakPlan.windows)."""
    return max(1, math.ceil(duration / window - 1e-9))


def soak_problem(duration: float, window: float, warmup: int) -> tuple[str, str] | None:
    """The key at fault ("duration" or "window") and why G4 could not judge this soak, or None.

    The reason is a predicate on the key at fault; it says "{duration}", "{window}" and
    "{warmup}" where the caller names the keys as its file writes them. G4's SNIA rules average
    the windows after the warm-up in ROUNDS rounds: with fewer windows they have no figure,
    and G4 could never pass.
    """
    if window > duration:
        return "window", "is longer than the soak, {duration}"
    windows = soak_windows(duration, window)
    if windows - warmup < ROUNDS:
        least = format_duration((ROUNDS + warmup) * window)
        return "duration", (
            f"holds {windows} window{'s' if windows > 1 else ''} of {{window}}, "
            f"{max(0, windows - warmup)} after the warm-up ({{warmup}}): G4's SNIA rules average "
            f"{ROUNDS} rounds of windows, so the soak needs {ROUNDS + warmup} windows or more: "
            f'lengthen it to at least "{least}" or shorten its window')
    return None
