"""`kvgate inventory`: collect the site's inventory and print it as a table or JSON."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..core.configuration import ConfigError, load_site
from ..storage import Collector, Found, SubprocessRunner, collect, fiohosts


def inventory_command(site_path: Path, as_json: bool) -> int:
    """`kvgate inventory`: collect the site's inventory and print it as a table or JSON."""
    console = Console(soft_wrap=True)  # never hard-wrap a path at the terminal width
    try:
        site, _ = load_site(site_path)
    except ConfigError as exc:
        console.print(f"[red]configuration error:[/] {escape(str(exc))}", highlight=False)
        return 2
    inv = collect(site, Collector(SubprocessRunner()))
    hosts = _fio_hosts(site.fio)
    if as_json:
        body = {"site": site.site.name, "dut": [d.model_dump() for d in inv.dut()],
                "inventory": inv.model_dump(mode="json"),
                "fio_hosts": [{"host": p.host, "fio": p.version, "hostname": p.hostname,
                               "error": p.error} for p in hosts]}
        print(json.dumps(body, indent=2))
        return 0
    table = Table(title=f"DUT inventory: {escape(site.site.name)}")
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
        facts.add_row(name, _status(getattr(inv, name)))
    gds = inv.gds
    facts.add_row("gpus", escape(", ".join(gds.gpus) or "none (no /proc/driver/nvidia/gpus)"))
    for name, found in (("gdscheck -p", gds.platform), ("cufile.json", gds.cufile),
                        ("gdsio + nvidia-fs stats", gds.path)):
        facts.add_row(name, _status(found) + _gds_detail(found))
    console.print(facts)
    if hosts:
        table = Table(title="fio client hosts (site.toml [fio] hosts)")
        for column in ("host", "fio", "hostname", "status"):
            table.add_column(column)
        for p in hosts:
            table.add_row(*map(escape, (p.host, p.version or "?", p.hostname)),
                          "[red]ERROR[/] " + escape(p.error) if p.error else "[green]ok[/]")
        console.print(table)
    return 0


def _fio_hosts(fio) -> list[fiohosts.HostProbe]:
    """Each [fio] host's fio server asked its version (a null job: no data moves)."""
    if not fio.hosts:
        return []
    with tempfile.TemporaryDirectory(prefix="kvgate-probe-") as folder:
        return fiohosts.probe_hosts(SubprocessRunner(), fio, Path(folder))


def _status(found: Found) -> str:
    return ("[red]ERROR[/] " + escape(found.error) if found.error else
            "[dim]NOT APPLICABLE[/] " + escape(found.skipped) if found.skipped
            else "[green]ok[/]")


def _gds_detail(found: Found) -> str:
    """What a GDS fact says, beside its status: versions, compat mode, the transfer type."""
    value = found.value
    if value is None:
        return ""
    if hasattr(value, "drivers"):
        supported = [n for n, v in value.drivers.items() if v == "Supported"]
        return escape(f": GDS {value.release}, nvidia_fs {value.nvidia_fs or 'absent'}, "
                      f"Supported {', '.join(supported) or 'none'}, IOMMU {value.iommu or '?'}, "
                      f"verified {str(value.verified).lower()}")
    if hasattr(value, "allow_compat_mode"):
        return escape(f": {value.path}, allow_compat_mode {str(value.allow_compat_mode).lower()}"
                      f", force_compat_mode {str(value.force_compat_mode).lower()}")
    return escape(": " + ", ".join(f"{r.io_type} {r.xfer_type}" for r in value.runs))
