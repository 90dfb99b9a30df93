"""Multi-source collectors: the md array (mdadm, procfs, sysfs), the NICs and RoCE GIDs (sysfs).

Each merges several readings into one Found fact and keeps all of them as evidence.
"""

from __future__ import annotations

from pathlib import Path

from .blockdev import ParseError, is_number
from .collector import Collector, Found
from .net import GidEntry, NicState, RdmaLink, parse_gid_table, parse_sysfs_net
from .raid import MdArray, parse_chunk_size, parse_mdadm_detail, parse_mdadm_export, parse_mdstat


def collect_raid(c: Collector, device: str) -> Found[MdArray]:
    """mdadm --detail, --export, /proc/mdstat and sysfs chunk_size, merged into one array."""
    detail = c.run(["mdadm", "--detail", device], parse_mdadm_detail)
    export = c.run(["mdadm", "--detail", "--export", device], parse_mdadm_export)
    evidence = detail.evidence + export.evidence
    mdstat_text = c.read("/proc/mdstat")
    kernel = Path(device).resolve().name if device.startswith("/dev/") else device
    chunk_text = c.read(f"/sys/block/{kernel}/md/chunk_size")
    evidence += c.keep("config-proc-mdstat.txt", mdstat_text or "(unreadable)\n")
    if chunk_text is not None:
        evidence += c.keep(f"config-sys-{kernel}-chunk_size.txt", chunk_text)
    array = detail.value or export.value
    if array is None:
        return Found(error=detail.error or export.error, evidence=evidence)
    array = array.model_copy(deep=True)
    if chunk_text is not None and array.chunk is None:
        try:
            array.chunk = parse_chunk_size(chunk_text, f"cat /sys/block/{kernel}/md/chunk_size")
        except ParseError as exc:
            return Found(error=str(exc), evidence=evidence)
    if mdstat_text:
        try:
            entry = next((a for a in parse_mdstat(mdstat_text) if a.name == kernel), None)
        except ParseError as exc:
            return Found(error=str(exc), evidence=evidence)
        if entry and "_" in entry.map and "degraded" not in array.state:
            # The kernel's own [UU_U] map wins over a stale reading.
            array.state = (array.state + ", degraded").lstrip(", ")
        if entry and array.chunk is None:
            array.chunk = entry.chunk
    return Found(value=array, evidence=evidence)


def collect_nics(c: Collector, names: list[str]) -> Found[list[NicState]]:
    """speed, mtu and operstate of each named interface from sysfs."""
    nics, lines = [], []
    for name in names:
        base = f"/sys/class/net/{name}"
        if c.read(f"{base}/operstate") is None:
            return Found(error=f"no network interface {name!r} on this host ({base} is "
                         "missing; site.toml [topology] interfaces)")
        values = {f: c.read(f"{base}/{f}") for f in ("speed", "mtu", "operstate")}
        lines += [f"{base}/{f}: {(v or '(unreadable)').strip()}" for f, v in values.items()]
        try:
            nics.append(parse_sysfs_net(name, values["speed"], values["mtu"],
                                        values["operstate"]))
        except ParseError as exc:
            return Found(error=str(exc))
    return Found(value=nics, evidence=c.keep("config-sysfs-net.txt", "\n".join(lines) + "\n"))


def collect_gids(c: Collector, links: list[RdmaLink]) -> Found[list[GidEntry]]:
    """The populated GID table entries (with their RoCE type) of the given RDMA ports."""
    entries, lines = [], []
    for link in links:
        base = f"/sys/class/infiniband/{link.device}/ports/{link.port}"
        tables: dict[str, dict[int, str]] = {"gids": {}, "gid_attrs/types": {},
                                             "gid_attrs/ndevs": {}}
        for sub, table in tables.items():
            folder = c.root / base.lstrip("/") / sub
            names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
            for name in filter(is_number, names):
                text = c.read(f"{base}/{sub}/{name}")
                if text is not None:
                    table[int(name)] = text
                    lines.append(f"{base}/{sub}/{name}: {text.strip()}")
        try:
            entries += parse_gid_table(link.device, link.port, tables["gids"],
                                       tables["gid_attrs/types"], tables["gid_attrs/ndevs"])
        except ParseError as exc:
            return Found(error=str(exc))
    return Found(value=entries, evidence=c.keep("config-sysfs-gids.txt",
                                                 "\n".join(lines) + "\n"))
