"""XFS geometry from xfs_info (a mounted path or an image), and the stripe-alignment rule. Pure."""

from __future__ import annotations

import re

from pydantic import BaseModel

from .blockdev import ParseError, is_number

# "data     =                       bsize=4096   blocks=262144, imaxpct=25"
_SECTION = re.compile(r"^([a-z-]*)\s*=(.*)$")
_PAIR = re.compile(r"([a-z0-9_-]+)=(\S+?)(?:,|\s|$)")


class XfsGeometry(BaseModel):
    """The figures of xfs_info that matter for alignment; sunit/swidth in filesystem blocks."""

    device: str = ""
    block_size: int
    blocks: int
    agcount: int
    agsize: int | None = None
    sector_size: int | None = None
    sunit: int = 0
    swidth: int = 0

    @property
    def stripe_unit(self) -> int:
        """The stripe unit in bytes (sunit × bsize); 0 when the filesystem has none."""
        return self.sunit * self.block_size

    @property
    def stripe_disks(self) -> float | None:
        """swidth / sunit: how many data disks the filesystem believes a stripe spans."""
        return self.swidth / self.sunit if self.sunit else None

    @property
    def size(self) -> int:
        """Data section size in bytes."""
        return self.blocks * self.block_size


def parse_xfs_info(text: str, command: str = "xfs_info") -> XfsGeometry:
    """The data-section geometry in xfs_info's output (xfsprogs 4.x to 6.x layout)."""
    sections: dict[str, dict[str, str]] = {}
    current = ""
    device = ""
    for line in text.splitlines():
        match = _SECTION.match(line)
        if not match:
            continue
        name, rest = match.groups()
        if name:
            current = name
            # "meta-data=/dev/loop0   isize=512 …": the first word may be the device.
            first = rest.split()[0] if rest.split() else ""
            if name == "meta-data" and "=" not in first:
                device = first
        section = sections.setdefault(current, {})
        for key, value in _PAIR.findall(rest):
            section.setdefault(key, value)
    data, meta = sections.get("data"), sections.get("meta-data")
    if not data or not meta:
        raise ParseError(command, "no 'meta-data=' and 'data =' sections")

    def number(table: dict[str, str], key: str, required: bool = True) -> int | None:
        value = table.get(key)
        if value is None:
            if required:
                raise ParseError(command, f"no {key}= in its output")
            return None
        if not is_number(value):
            raise ParseError(command, f"{key}={value!r} is not a number")
        return int(value)

    block_size = number(data, "bsize")
    if not block_size:
        raise ParseError(command, "data bsize is 0")
    return XfsGeometry(device=device, block_size=block_size, blocks=number(data, "blocks"),
                       agcount=number(meta, "agcount"), agsize=number(meta, "agsize", False),
                       sector_size=number(meta, "sectsz", False),
                       sunit=number(data, "sunit", False) or 0,
                       swidth=number(data, "swidth", False) or 0)


class Alignment(BaseModel):
    """The two alignment rules judged: stripe unit = chunk, swidth/sunit = data disks."""

    stripe_unit: int  # bytes, from the filesystem
    chunk: int  # bytes, expected
    stripe_disks: float | None  # from the filesystem
    data_disks: int  # expected

    @property
    def unit_ok(self) -> bool:
        """sunit × bsize equals the RAID chunk."""
        return self.stripe_unit == self.chunk

    @property
    def width_ok(self) -> bool:
        """swidth / sunit equals the number of data disks."""
        return self.stripe_disks is not None and self.stripe_disks == self.data_disks

    def explain(self) -> str:
        """What is wrong, in a site engineer's words ("" when both rules hold)."""
        problems = []
        if self.stripe_unit == 0:
            problems.append(
                f"the filesystem has no stripe unit (sunit=0) but the RAID chunk is "
                f"{self.chunk // 1024} KiB: XFS will not align its writes to the stripe; "
                f"re-create it with mkfs.xfs -d su={self.chunk // 1024}k,sw={self.data_disks}")
            return "; ".join(problems)
        if not self.unit_ok:
            problems.append(
                f"stripe unit is {self.stripe_unit // 1024} KiB (sunit × bsize) but the RAID "
                f"chunk is {self.chunk // 1024} KiB")
        if not self.width_ok:
            problems.append(
                f"stripe width is {self.stripe_disks:g} × the stripe unit but the array has "
                f"{self.data_disks} data disks")
        if problems:
            problems.append(f"re-create with mkfs.xfs -d su={self.chunk // 1024}k,"
                            f"sw={self.data_disks}")
        return "; ".join(problems)


def alignment(geometry: XfsGeometry, chunk: int, disks: int) -> Alignment:
    """Hold the filesystem's stripe geometry against the RAID chunk and data-disk count."""
    return Alignment(stripe_unit=geometry.stripe_unit, chunk=chunk,
                     stripe_disks=geometry.stripe_disks, data_disks=disks)
