"""Collectors for G1's configuration checks, the site inventory, and `kvgate inventory`.

Every command runs through the command-runner seam with a timeout; every raw output is kept as
evidence. What does not apply to the site (from site.toml [topology]) is skipped with the
reason; what could not be collected carries the error (a missing tool names its package).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, Field

from ._blockdev import (
    LSBLK_COLUMNS,
    BlockDevice,
    Mount,
    ParseError,
    is_number,
    parse_findmnt,
    parse_lsblk,
)
from ._net import GidEntry, NicState, RdmaLink, parse_gid_table, parse_rdma_links, parse_sysfs_net
from ._nvme import (
    Controller,
    Namespace,
    SmartLog,
    Subsystem,
    parse_id_ctrl,
    parse_list_subsys,
    parse_nvme_list,
    parse_smart_log,
)
from ._raid import MdArray, parse_chunk_size, parse_mdadm_detail, parse_mdadm_export, parse_mdstat
from ._record import DutItem
from ._runner import CommandRunner, ToolMissing
from ._settings import Site, Topology
from ._xfs import XfsGeometry, parse_xfs_info

T = TypeVar("T")
TIMEOUT = 30.0

# The package that carries each tool, named when the tool is missing.
PACKAGES = {
    "mdadm": "mdadm", "nvme": "nvme-cli", "rdma": "iproute2 (Debian: apt-get install iproute2; "
    "RHEL: dnf install iproute)", "xfs_info": "xfsprogs", "findmnt": "util-linux",
    "lsblk": "util-linux",
}


def install_hint(tool: str) -> str:
    """What to install to get a tool, for an ERROR a site engineer can act on."""
    package = PACKAGES.get(tool, tool)
    if "(" in package:
        return f"install {package}"
    return f"install {package} (Debian/Ubuntu: apt-get install {package}; RHEL: dnf install " \
           f"{package})"


class Found(BaseModel, Generic[T]):
    """One collected fact: its value, or why it is missing (error) or does not apply (skipped)."""

    value: T | None = None
    error: str = ""
    skipped: str = ""
    evidence: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether a value was collected."""
        return self.value is not None and not self.error and not self.skipped


class Inventory(BaseModel):
    """Everything G1's configuration checks judge, as collected from the host."""

    target: str
    mount: Found[Mount] = Found()
    block: Found[list[BlockDevice]] = Found()
    xfs: Found[XfsGeometry] = Found()
    raid: Found[MdArray] = Found()
    namespaces: Found[list[Namespace]] = Found()
    controllers: dict[str, Found[Controller]] = Field(default_factory=dict)
    smart: dict[str, Found[SmartLog]] = Field(default_factory=dict)
    subsystems: Found[list[Subsystem]] = Found()
    nics: Found[list[NicState]] = Found()
    rdma: Found[list[RdmaLink]] = Found()
    gids: Found[list[GidEntry]] = Found()
    tool_versions: dict[str, str] = Field(default_factory=dict)

    def dut(self) -> list[DutItem]:
        """The identity of the device under test: models, serials and firmware."""
        items = []
        if self.raid.ok:
            r = self.raid.value
            items.append(DutItem(role="md array", name=r.device, detail=(
                f"{r.level}, {len(r.members)} members, chunk "
                f"{(r.chunk or 0) // 1024} KiB, state {r.state or 'unknown'}")))
        for dev in (self.block.value or []) if self.block.ok else []:
            items.append(DutItem(role="block device", name=dev.path, model=dev.model,
                                 serial=dev.serial, firmware=dev.revision,
                                 detail=_bytes(dev.size)))
        for name, ctrl in self.controllers.items():
            if ctrl.ok:
                c = ctrl.value
                items.append(DutItem(role="NVMe controller", name=name, model=c.model,
                                     serial=c.serial, firmware=c.firmware))
        for sub in (self.subsystems.value or []) if self.subsystems.ok else []:
            transports = sorted({p.transport for p in sub.paths})
            items.append(DutItem(role="NVMe subsystem", name=sub.name, model=sub.model,
                                 serial=sub.serial, detail=f"{sub.nqn} via "
                                 f"{', '.join(transports) or 'no path'}"))
        for nic in (self.nics.value or []) if self.nics.ok else []:
            speed = f"{nic.speed_gbps:g} Gb/s" if nic.speed_gbps is not None else "speed unknown"
            items.append(DutItem(role="NIC", name=nic.name,
                                 detail=f"{speed}, MTU {nic.mtu}, {nic.operstate}"))
        for link in (self.rdma.value or []) if self.rdma.ok else []:
            items.append(DutItem(role="RDMA port", name=link.name,
                                 detail=f"{link.state} on {link.netdev or 'no netdev'}"))
        return items


def _bytes(size: int | None) -> str:
    if size is None:
        return "size unknown"
    return f"{size / 1e12:,.2f} TB" if size >= 1e12 else f"{size / 1e9:,.1f} GB"


def applies(topology: Topology) -> dict[str, str]:
    """Why each group of checks does NOT apply to this site ("" = it applies)."""
    transport = topology.transport
    return {
        "raid": "" if topology.raid_level is not None else (
            "site.toml [topology] sets no raid_level: the host builds no md RAID (e.g. the "
            "array exports one namespace)"),
        "nvme": "" if transport != "local" else (
            'site.toml [topology] transport is "local": the target is not on NVMe devices '
            "kvgate was asked to check (set transport and devices for an NVMe array)"),
        "fabric": "" if transport in ("tcp", "rdma") else (
            f'site.toml [topology] transport is "{transport}": no NVMe over Fabrics'),
        "nics": "" if topology.interfaces else (
            "site.toml [topology] names no interfaces that carry storage traffic"),
        "rdma": "" if transport == "rdma" else (
            f'site.toml [topology] transport is "{transport}": no RDMA, so no RoCE'),
    }


def _slug(argv: Sequence[str]) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", " ".join(argv))[:80].strip("-")


class Collector:
    """Runs the configuration commands and reads sysfs, keeping every raw output as evidence."""

    def __init__(self, runner: CommandRunner, evidence_dir: Path | None = None,
                 root: Path = Path("/"), timeout: float = TIMEOUT):
        self.runner, self.evidence_dir, self.root, self.timeout = (runner, evidence_dir, root,
                                                                   timeout)
        self.evidence: list[Path] = []
        self.used: set[str] = set()

    def _keep(self, name: str, text: str) -> list[str]:
        if self.evidence_dir is None:
            return []
        self.evidence_dir.mkdir(parents=True, exist_ok=True)
        path = self.evidence_dir / name
        path.write_text(text)
        self.evidence.append(path)
        return [path.name]

    def run(self, argv: Sequence[str], parse: Callable[[str, str], T]) -> Found[T]:
        """Run argv and parse its stdout; any failure becomes an error that names the command."""
        command = " ".join(argv)
        tool = Path(argv[0]).name
        try:
            done = self.runner.run(argv, timeout=self.timeout)
        except ToolMissing:
            return Found(error=f"`{command}`: '{tool}' is not installed: {install_hint(tool)}")
        except OSError as exc:
            return Found(error=f"`{command}` could not start: {exc.strerror or exc}")
        self.used.add(tool)
        slug = _slug(argv)
        evidence = self._keep(f"config-{slug}.out", done.stdout)
        if done.stderr.strip() or done.returncode:
            evidence += self._keep(f"config-{slug}.err",
                                   f"exit status {done.returncode}\n{done.stderr}")
        if done.timed_out:
            return Found(error=f"`{command}` did not finish within {self.timeout:g} s",
                         evidence=evidence)
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            return Found(error=f"`{command}` failed (exit status {done.returncode})"
                         + (f": {said[-1][:200]}" if said else ""), evidence=evidence)
        try:
            return Found(value=parse(done.stdout, command), evidence=evidence)
        except ParseError as exc:
            return Found(error=str(exc), evidence=evidence)

    def read(self, path: str) -> str | None:
        """A sysfs or procfs file's text, or None when it is missing or unreadable (EINVAL)."""
        try:
            return (self.root / path.lstrip("/")).read_text(errors="replace")
        except OSError:
            return None

    def version(self, tool: str, argv: Sequence[str]) -> str:
        """The first line a tool prints about its version ("" when it cannot say)."""
        try:
            done = self.runner.run(argv, timeout=self.timeout)
        except (ToolMissing, OSError):
            return ""
        if done.returncode != 0 or done.timed_out:
            return ""
        text = (done.stdout.strip() or done.stderr.strip()).splitlines()
        return text[0][:120] if text else ""


VERSION_ARGV = {"mdadm": ["mdadm", "--version"], "nvme": ["nvme", "version"],
                "xfs_info": ["xfs_info", "-V"], "findmnt": ["findmnt", "--version"],
                "rdma": ["rdma", "-V"]}


def _md_device(topology: Topology, mount: Mount | None) -> str:
    if topology.md_device:
        return topology.md_device
    if mount and re.match(r"/dev/md", mount.source):
        return mount.source
    return ""


def collect_raid(c: Collector, device: str) -> Found[MdArray]:
    """mdadm --detail, --export, /proc/mdstat and sysfs chunk_size, merged into one array."""
    detail = c.run(["mdadm", "--detail", device], parse_mdadm_detail)
    export = c.run(["mdadm", "--detail", "--export", device], parse_mdadm_export)
    evidence = detail.evidence + export.evidence
    mdstat_text = c.read("/proc/mdstat")
    kernel = Path(device).resolve().name if device.startswith("/dev/") else device
    chunk_text = c.read(f"/sys/block/{kernel}/md/chunk_size")
    evidence += c._keep("config-proc-mdstat.txt", mdstat_text or "(unreadable)\n")
    if chunk_text is not None:
        evidence += c._keep(f"config-sys-{kernel}-chunk_size.txt", chunk_text)
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
    return Found(value=nics, evidence=c._keep("config-sysfs-net.txt", "\n".join(lines) + "\n"))


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
    return Found(value=entries, evidence=c._keep("config-sysfs-gids.txt",
                                                 "\n".join(lines) + "\n"))


def collect(site: Site, c: Collector) -> Inventory:
    """Collect what G1's configuration checks need for this site, and nothing that is N/A."""
    topo, why = site.topology, applies(site.topology)
    target = str(site.target.directory.resolve())
    inv = Inventory(target=target)
    # The target may not exist yet (create = true): its filesystem is its nearest parent's.
    probe = next((p for p in (Path(target), *Path(target).parents) if p.exists()), Path("/"))
    inv.mount = c.run(["findmnt", "-J", "--target", str(probe)], parse_findmnt_first)
    mount = inv.mount.value
    if mount:
        inv.block = c.run(["lsblk", "-J", "-b", "-o", LSBLK_COLUMNS, mount.source], parse_lsblk) \
            if mount.source.startswith("/dev/") else Found(
                skipped=f"the target's filesystem comes from {mount.source!r}, not a block device")
        inv.xfs = c.run(["xfs_info", mount.target], parse_xfs_info) if mount.fstype == "xfs" \
            else Found(skipped=f"the target is on {mount.fstype or 'an unknown filesystem'}, "
                       "not XFS")
    else:
        inv.block = inv.xfs = Found(error=f"could not tell which filesystem holds {target}: "
                                    f"{inv.mount.error}")
    if why["raid"]:
        inv.raid = Found(skipped=why["raid"])
    elif device := _md_device(topo, mount):
        inv.raid = collect_raid(c, device)
    else:
        inv.raid = Found(error=f"site.toml [topology] raid_level = {topo.raid_level} but the "
                         f"target is mounted from {mount.source if mount else 'an unknown device'}"
                         ", not an md device: set [topology] md_device")
    if why["nvme"]:
        inv.namespaces = Found(skipped=why["nvme"])
    else:
        inv.namespaces = c.run(["nvme", "list", "-o", "json"], parse_nvme_list)
        if inv.namespaces.ok and topo.devices:
            wanted = set(topo.devices)
            inv.namespaces.value = [n for n in inv.namespaces.value if n.device in wanted]
        for ctrl in sorted({n.controller for n in inv.namespaces.value or []}):
            inv.controllers[ctrl] = c.run(["nvme", "id-ctrl", ctrl, "-o", "json"], parse_id_ctrl)
            inv.smart[ctrl] = c.run(["nvme", "smart-log", ctrl, "-o", "json"], parse_smart_log)
    inv.subsystems = Found(skipped=why["fabric"]) if why["fabric"] else c.run(
        ["nvme", "list-subsys", "-o", "json"], parse_list_subsys)
    inv.nics = Found(skipped=why["nics"]) if why["nics"] else collect_nics(c, topo.interfaces)
    if why["rdma"]:
        inv.rdma = inv.gids = Found(skipped=why["rdma"])
    else:
        inv.rdma = c.run(["rdma", "-j", "link", "show"], parse_rdma_links)
        if inv.rdma.ok:
            inv.rdma.value = [link for link in inv.rdma.value if _ours(link, topo)]
            inv.gids = collect_gids(c, inv.rdma.value)
        else:
            inv.gids = Found(error=f"no RDMA ports to read GIDs from: {inv.rdma.error}")
    inv.tool_versions = {tool: v for tool in sorted(c.used & VERSION_ARGV.keys())
                         if (v := c.version(tool, VERSION_ARGV[tool]))}
    return inv


def _ours(link: RdmaLink, topology: Topology) -> bool:
    if topology.rdma_device:
        return link.device == topology.rdma_device
    return not topology.interfaces or link.netdev in topology.interfaces


def parse_findmnt_first(text: str, command: str) -> Mount:
    """The one filesystem ``findmnt -J --target PATH`` prints."""
    mounts = parse_findmnt(text, command)
    if not mounts:
        raise ParseError(command, "it listed no filesystem")
    return mounts[0]


def inventory_command(site_path: Path, as_json: bool) -> int:
    """`kvgate inventory`: collect the site's inventory and print it as a table or JSON."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ._config import ConfigError, load_site
    from ._runner import SubprocessRunner

    console = Console()
    try:
        site, _ = load_site(site_path)
    except ConfigError as exc:
        console.print(f"[red]configuration error:[/] {exc}")
        return 2
    inv = collect(site, Collector(SubprocessRunner()))
    if as_json:
        body = {"site": site.site.name, "dut": [d.model_dump() for d in inv.dut()],
                "inventory": inv.model_dump(mode="json")}
        print(json.dumps(body, indent=2))
        return 0
    table = Table(title=f"DUT inventory: {site.site.name}")
    for column in ("role", "name", "model", "serial", "firmware", "detail"):
        table.add_column(column)
    for item in inv.dut():
        table.add_row(*map(escape, (item.role, item.name, item.model, item.serial,
                                    item.firmware, item.detail)))
    console.print(table)
    facts = Table(title="collected facts")
    for column in ("fact", "status"):
        facts.add_column(column)
    for name in ("mount", "block", "xfs", "raid", "namespaces", "subsystems", "nics", "rdma",
                 "gids"):
        found: Found = getattr(inv, name)
        status = ("[red]ERROR[/] " + escape(found.error) if found.error else
                  "[dim]NOT APPLICABLE[/] " + escape(found.skipped) if found.skipped
                  else "[green]ok[/]")
        facts.add_row(name, status)
    console.print(facts)
    return 0
