"""Whether the page-cache drop before a probe took effect: believed only where it was measured.

``posix_fadvise(DONTNEED)`` is advice: pages that are mapped, locked or busy stay, and some
filesystems keep every page (tmpfs pages are the file itself). So kvgate measures each KV
file's resident bytes (mincore(2)) before and after the drop, and only a drop that left at most
``RESIDENT_MAX`` of the files' bytes resident, with every file measured, counts as dropped:
only such a drop may rule memory out (controls.working_set). Pure.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field, NonNegativeInt

from ..core.quantities import format_size
from ..core.verdicts import Cause, Deviation

# The share of the KV files' bytes that may still be resident after the drop. fsync then
# DONTNEED on a file nobody maps leaves none (measured on ext4); the allowance covers a page
# the engine touches between the drop and the look, not a drop that did not happen.
RESIDENT_MAX = 0.01
SHOWN = 3  # unmeasured files named in a message; the rest are counted


class CacheDrop(BaseModel):
    """The page-cache drop of a probe's KV files (or of a level's probes), as measured."""

    how: str = ""  # what was done: "posix_fadvise(DONTNEED) after fsync on N KV files ..."
    files: NonNegativeInt = 0
    bytes: NonNegativeInt = 0  # the files' size
    # Bytes of those files in the page cache before and after the drop (mincore); None: the
    # residency was not measured at all (a record from before it was).
    resident_before: NonNegativeInt | None = None
    resident_after: NonNegativeInt | None = None
    # Files whose residency could not be measured, each with why (mmap refused: FUSE, ...).
    unmeasured: list[str] = Field(default_factory=list)
    probes: NonNegativeInt = 1  # how many probes' drops this adds up
    undropped: NonNegativeInt = 0  # of them, probes that had no drop at all

    @property
    def allowed(self) -> int:
        """Resident bytes the drop may leave and still count (RESIDENT_MAX of the files)."""
        return math.floor(self.bytes * RESIDENT_MAX)

    @property
    def verified(self) -> bool:
        """The drop was measured on every file and left (almost) nothing resident."""
        return (self.resident_after is not None and not self.unmeasured and not self.undropped
                and self.bytes > 0 and self.resident_after <= self.allowed)

    def residency(self) -> str:
        """What mincore found, for the chain and the report."""
        parts = []
        if self.resident_after is not None:
            before = "" if self.resident_before is None else \
                f"{self.resident_before:,} before the drop, "
            files = f" in {self.files:,} KV files" if self.files else ""
            some = ", in the files it could measure" if self.unmeasured else ""
            parts.append(f"resident (mincore{some}): {before}{self.resident_after:,} after, of "
                         f"{self.bytes:,} bytes{files}")
        else:
            parts.append("the residency of the KV files was not measured")
        if self.unmeasured:
            more = len(self.unmeasured) - SHOWN
            parts.append(f"{len(self.unmeasured):,} files could not be measured: "
                         + "; ".join(self.unmeasured[:SHOWN])
                         + (f" (+{more:,} more)" if more > 0 else ""))
        if self.undropped:
            parts.append(f"{self.undropped} of {self.probes} probes had no page-cache drop")
        return "; ".join(parts)

    def failure(self) -> str:
        """Why the drop does not count ("" when it is verified), naming the bytes."""
        if self.verified:
            return ""
        if self.undropped:
            return f"{self.undropped} of {self.probes} probes had no page-cache drop"
        if self.resident_after is None:
            return f"the drop could not be verified: {self.residency()}"
        if self.bytes == 0 and not self.unmeasured:
            return "the KV directory held no bytes to drop: the drop verified nothing"
        if self.resident_after > self.allowed:
            return (f"the drop did not take effect: {self.resident_after:,} of {self.bytes:,} "
                    f"bytes ({format_size(self.resident_after)}) of the KV files stayed in the "
                    f"page cache (mincore), more than {RESIDENT_MAX:.0%} "
                    "(mapped, locked or busy pages, or a filesystem that keeps them)")
        return f"the drop could not be verified: {self.residency()}"

    def line(self) -> str:
        """What was done and what mincore found, in one line."""
        return "; ".join(filter(None, [self.how, self.residency()]))

    def deviation(self, where: str) -> Deviation | None:
        """The record's deviation for a drop that does not count (None for a verified one)."""
        why = self.failure()
        return Deviation(cause=Cause.PAGE_CACHE_KEPT,
                         text=f"page cache not dropped before the probe {where}: {why}") \
            if why else None

    def __add__(self, other: CacheDrop) -> CacheDrop:
        """Two probes' drops together (a level's repetitions)."""
        def add(a, b):
            return None if a is None or b is None else a + b
        return CacheDrop(
            how=self.how or other.how,  # the first probe's: the others differ in sizes only
            files=self.files + other.files, bytes=self.bytes + other.bytes,
            resident_before=add(self.resident_before, other.resident_before),
            resident_after=add(self.resident_after, other.resident_after),
            unmeasured=self.unmeasured + other.unmeasured, probes=self.probes + other.probes,
            undropped=self.undropped + other.undropped)


def together(a: CacheDrop | None, b: CacheDrop | None) -> CacheDrop | None:
    """Two probes' drops added up; a probe without one counts as undropped, not as dropped."""
    if a is None and b is None:
        return None
    return (a or CacheDrop(undropped=1)) + (b or CacheDrop(undropped=1))
