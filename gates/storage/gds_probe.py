"""Collecting the GPUDirect Storage facts G1 judges: whether the site needs GDS, the GPUs, `gdscheck
-p`, cufile.json, a short `gdsio` run on the target with nvidia-fs's stats before and after.

Nothing is collected where the site needs no GDS: the facts are skipped with the reason (no GPU
is a fact of its own). Where it needs GDS, a missing tool is an error naming gds-tools.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pydantic import BaseModel

from ..core.configuration import Site
from .collector import Collector, Found
from .gds import (
    CufileConfig,
    GdsioRun,
    GdsPlatform,
    NvfsStats,
    parse_cufile_json,
    parse_gdscheck,
    parse_gdsio,
    parse_ip_addresses,
    parse_nvfs_stats,
)

GDS_TOOLS = Path("/usr/local/cuda/gds/tools")  # where gds-tools installs gdscheck and gdsio
NVFS_STATS = "/proc/driver/nvidia-fs/stats"
NVIDIA_GPUS = "/proc/driver/nvidia/gpus"  # one folder per GPU the NVIDIA driver drives
MULTIPATH = "/sys/module/nvme_core/parameters/multipath"
CUFILE_DEFAULT = "/etc/cufile.json"
# LMCache's GDS backend is chosen by its gds_path key (LMCACHE_GDS_PATH; LMCache 0.5.6
# lmcache/v1/config.py, lmcache/v1/storage_backend/gds_backend.py): the arm moves KV by cuFile.
ARM_GDS_KEYS = ("LMCACHE_GDS_PATH",)


class GdsPathRun(BaseModel):
    """A short gdsio write and read on the target, with nvidia-fs's counters around it."""

    runs: list[GdsioRun]
    before: NvfsStats | None = None  # None: /proc/driver/nvidia-fs/stats was not there
    after: NvfsStats | None = None


def gds_declared(site: Site) -> str:
    """Where the site says the KV moves GPU-direct ("" = nowhere)."""
    if site.topology.gds:
        return f'site.toml [topology] gds = "{site.topology.gds}"'
    for name, arm in site.arms.items():
        if keys := [k for k in ARM_GDS_KEYS if arm.env.get(k)]:
            return f"arms.{name} env {keys[0]} (the engine's GPUDirect Storage backend)"
    return ""


def gpus(c: Collector) -> list[str]:
    """The PCI addresses of the GPUs the NVIDIA driver drives (empty: none, or no driver)."""
    folder = c.root / NVIDIA_GPUS.lstrip("/")
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _tool(c: Collector, name: str) -> str:
    found = shutil.which(name) or (str(GDS_TOOLS / name)
                                   if (GDS_TOOLS / name).exists() else None)
    return found or name  # the bare name: the runner says it is missing, naming gds-tools


def cufile_path(site: Site) -> tuple[str, str]:
    """The cufile.json the engine reads and why: the candidate arm's CUFILE_ENV_PATH_JSON, then
    kvgate's own environment, then /etc/cufile.json (GDS Configuration Guide)."""
    for name in ("candidate", *site.arms):
        arm = site.arms.get(name)
        if arm and arm.env.get("CUFILE_ENV_PATH_JSON"):
            return arm.env["CUFILE_ENV_PATH_JSON"], f"arms.{name} env CUFILE_ENV_PATH_JSON"
    if path := os.environ.get("CUFILE_ENV_PATH_JSON"):
        return path, "CUFILE_ENV_PATH_JSON"
    return CUFILE_DEFAULT, "the default"


def read_cufile(c: Collector, site: Site) -> Found[CufileConfig]:
    """cufile.json parsed, or why it could not be read."""
    path, why = cufile_path(site)
    text = c.read(path)
    if text is None:
        return Found(error=f"cannot read {path} ({why}): cuFile would run on its defaults, "
                     "allow_compat_mode true among them; install gds-tools or point "
                     "CUFILE_ENV_PATH_JSON at the engine's cufile.json")
    evidence = c.keep("config-cufile.json", text)
    try:
        return Found(value=parse_cufile_json(text, path), evidence=evidence)
    except ValueError as exc:
        return Found(error=str(exc), evidence=evidence)


def _stats(c: Collector, name: str) -> tuple[NvfsStats | None, list[str], str]:
    text = c.read(NVFS_STATS)
    if text is None:
        return None, [], ""
    evidence = c.keep(f"config-nvidia-fs-stats-{name}.txt", text)
    try:
        return parse_nvfs_stats(text, NVFS_STATS), evidence, ""
    except ValueError as exc:
        return None, evidence, str(exc)


def run_gdsio(c: Collector, target: Path) -> Found[GdsPathRun]:
    """64 MiB written then read GPU-direct (-x 0) by 4 threads on GPU 0 in target/.kvgate-gdsio."""
    if not target.is_dir():
        return Found(error=f"gdsio not run: the target directory {target} does not exist yet")
    before, evidence, problem = _stats(c, "before")
    folder = target / ".kvgate-gdsio"
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        return Found(error=f"cannot make {folder} for gdsio: {exc.strerror or exc}")
    runs: list[GdsioRun] = []
    try:
        for io in ("1", "0"):  # -I 1 write, -I 0 read (gdsio -h)
            done = c.run([_tool(c, "gdsio"), "-D", str(folder), "-d", "0", "-w", "4", "-s", "16M",
                          "-i", "1M", "-x", "0", "-I", io], parse_gdsio)
            evidence += done.evidence
            if not done.ok:
                return Found(error=done.error, evidence=evidence)
            runs += done.value
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    after, more, later = _stats(c, "after")
    if problem or later:
        return Found(error=problem or later, evidence=evidence + more)
    return Found(value=GdsPathRun(runs=runs, before=before, after=after),
                 evidence=evidence + more)


class GdsFacts(BaseModel):
    """The GDS facts of one site, each collected or skipped with the reason."""

    declared: str = ""
    gpus: list[str] = []
    platform: Found[GdsPlatform] = Found()
    cufile: Found[CufileConfig] = Found()
    path: Found[GdsPathRun] = Found()
    addresses: Found[dict[str, list[str]]] = Found()
    multipath: str = ""  # nvme_core's multipath parameter: "Y", "N" or "" (not loaded)


def collect_gds(site: Site, c: Collector, target: Path) -> GdsFacts:
    """Everything the GDS checks judge, or the reason none of it applies."""
    facts = GdsFacts(declared=gds_declared(site), gpus=gpus(c))
    if not facts.declared:
        why = ("the site declares no GPUDirect Storage (site.toml [topology] gds, or an arm "
               "with LMCACHE_GDS_PATH)")
        why = why + ("" if facts.gpus else f" and this host has no NVIDIA GPU ({NVIDIA_GPUS} "
                     "is absent)")
        facts.platform = facts.cufile = facts.path = facts.addresses = Found(skipped=why)
        return facts
    facts.platform = c.run([_tool(c, "gdscheck"), "-p"], parse_gdscheck)
    facts.cufile = read_cufile(c, site)
    facts.multipath = (c.read(MULTIPATH) or "").strip()
    facts.addresses = c.run(["ip", "-j", "addr", "show"], parse_ip_addresses)
    facts.path = run_gdsio(c, target) if facts.platform.ok else Found(
        error=f"not run: gdscheck -p gave nothing to go on ({facts.platform.error})")
    return facts
