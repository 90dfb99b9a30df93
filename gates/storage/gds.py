"""GPUDirect Storage facts: `gdscheck -p`, cufile.json, `gdsio` and nvidia-fs's stats, parsed. Pure.

Formats, as read (tests/data/gds/README.md cites each recorded output):
- `gdscheck -p` (gds-tools 1.7-1.16): a header (`GDS release version:`, `nvidia_fs version:  2.17
  libcufile version: 2.12`), DRIVER CONFIGURATION lines `NAME : Supported|Unsupported|compat`,
  CUFILE CONFIGURATION `properties.KEY : VALUE`, and PLATFORM INFO (`IOMMU: disabled`,
  `Platform verification succeeded`) -- NVIDIA GPUDirect Storage Installation and Troubleshooting
  Guide, "Verifying a Successful GDS Installation"; NVIDIA/gds-nvidia-fs#31, #77.
- cufile.json: JSON with // comments (the file GDS installs as /etc/cufile.json); keys from the
  GDS Configuration Guide, "GPUDirect Storage Parameters" and the cuFile API reference,
  "cuFile Compatibility Mode".
- gdsio: `IoType: WRITE XferType: GPUD Threads: 4 DataSetSize: ... ops: N total_time T secs`
  (GDS Getting Started, "Demonstrating GDS with GDSIO"; XferType GPUD = -x 0, GPU direct).
- /proc/driver/nvidia-fs/stats: `Reads : n=N ok=N err=N readMiB=N ...` only while
  /sys/module/nvidia_fs/parameters/rw_stats_enabled is 1; with it off only `Reads : err=N
  io_state_err=N` (NVIDIA/gds-nvidia-fs src/nvfs-stat.c, nvfs_stats_show, driver 2.2x).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from .blockdev import ParseError, json_document

# The DRIVER CONFIGURATION names gdscheck prints (gds-tools 1.16.1, gds-nvidia-fs#77; "NVMe
# P2PDMA" from the GDS Support for NVMe using PCI P2PDMA guide), which site.toml [topology]
# gds names.
GDS_DRIVERS = ("NVMe P2PDMA", "NVMe", "NVMeOF", "SCSI", "ScaleFlux CSD", "NVMesh",
               "DDN EXAScaler", "IBM Spectrum Scale", "NFS", "BeeGFS", "ScaTeFS", "VIRTIOFS",
               "WekaFS", "Userspace RDMA")
# Drivers that reach their storage over userspace RDMA: cuFile needs rdma_dev_addr_list
# (GDS Configuration Guide, "GPUDirect Storage Parameters": properties:rdma_dev_addr_list).
RDMA_DRIVERS = ("DDN EXAScaler", "IBM Spectrum Scale", "NFS", "BeeGFS", "WekaFS",
                "Userspace RDMA")


class GdsPlatform(BaseModel):
    """What `gdscheck -p` says of the platform."""

    release: str = ""
    nvidia_fs: str = ""  # "" = no nvidia_fs version printed (the module is not loaded)
    libcufile: str = ""
    drivers: dict[str, str] = {}  # DRIVER CONFIGURATION name -> Supported / Unsupported / compat
    properties: dict[str, str] = {}  # CUFILE CONFIGURATION properties.KEY -> value
    iommu: str = ""  # PLATFORM INFO "IOMMU: disabled" -> "disabled"
    verified: bool = False  # "Platform verification succeeded"


def parse_gdscheck(text: str, command: str) -> GdsPlatform:
    """The platform as `gdscheck -p` prints it; ParseError when it printed no driver table."""
    platform = GdsPlatform()
    if m := re.search(r"GDS release version:\s*(\S+)", text):
        platform.release = m.group(1)
    if m := re.search(r"nvidia_fs version:\s*([0-9][\w.]*)", text):
        platform.nvidia_fs = m.group(1)
    if m := re.search(r"libcufile version:\s*(\S+)", text):
        platform.libcufile = m.group(1)
    for line in text.splitlines():
        name, sep, value = (part.strip() for part in line.partition(":"))
        if not sep:
            continue
        if name in GDS_DRIVERS:
            platform.drivers[name] = value
        elif name.startswith("properties."):
            platform.properties[name.removeprefix("properties.")] = value
        elif name == "IOMMU":
            platform.iommu = value.lower()
    platform.verified = "Platform verification succeeded" in text
    if not platform.drivers:
        raise ParseError(command, "it printed no DRIVER CONFIGURATION table")
    return platform


class CufileConfig(BaseModel):
    """The cuFile settings that decide whether I/O goes GPU-direct or through POSIX."""

    path: str
    allow_compat_mode: bool = True  # cuFile's default: fall back to POSIX silently
    force_compat_mode: bool = False
    use_pci_p2pdma: bool = False
    rdma_dev_addr_list: list[str] = []
    # Per-filesystem keys that send writes through POSIX, as "fs.weka.rdma_write_support".
    compat_writes: list[str] = []


def _strip_comments(text: str) -> str:
    # cufile.json carries // comments; a "//" inside a string (a URL, a path) is kept.
    out, in_string, i = [], False, 0
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


# Keys whose false value makes cuFile write through POSIX on that filesystem (cuFile API
# reference, "cuFile Compatibility Mode": weka rdma_write_support; GDS parameters:
# gpfs gds_write_support).
COMPAT_WRITE_KEYS = (("weka", "rdma_write_support"), ("gpfs", "gds_write_support"))


def parse_cufile_json(text: str, path: str) -> CufileConfig:
    """cufile.json's compat, P2PDMA and RDMA settings; ParseError naming the file if unreadable."""
    document = json_document(re.sub(r",(\s*[}\]])", r"\1", _strip_comments(text)), path)
    if not isinstance(document, dict):
        raise ParseError(path, "it is not a JSON object")
    props = document.get("properties") or {}
    fs = document.get("fs") or {}
    if not isinstance(props, dict) or not isinstance(fs, dict):
        raise ParseError(path, '"properties" and "fs" must be objects')
    addresses = props.get("rdma_dev_addr_list") or []
    compat_writes = [f"fs.{name}.{key}" for name, key in COMPAT_WRITE_KEYS
                     if isinstance(fs.get(name), dict) and fs[name].get(key) is False]
    return CufileConfig(path=path, allow_compat_mode=props.get("allow_compat_mode", True) is True,
                        force_compat_mode=props.get("force_compat_mode", False) is True,
                        use_pci_p2pdma=props.get("use_pci_p2pdma", False) is True,
                        rdma_dev_addr_list=[str(a) for a in addresses],
                        compat_writes=compat_writes)


class GdsioRun(BaseModel):
    """One gdsio result line."""

    io_type: str  # READ / WRITE
    xfer_type: str  # GPUD = GPU direct; CPUONLY, CPU_GPU, ... are bounce paths
    ops: int
    throughput: str = ""


GDSIO_LINE = re.compile(r"IoType:\s*(\w+)\s+XferType:\s*(\w+).*?Throughput:\s*([\d.]+ \S+)"
                        r".*?ops:\s*(\d+)")


def parse_gdsio(text: str, command: str) -> list[GdsioRun]:
    """Every result line gdsio printed; ParseError when there is none."""
    runs = [GdsioRun(io_type=m.group(1), xfer_type=m.group(2), throughput=m.group(3),
                     ops=int(m.group(4))) for m in GDSIO_LINE.finditer(text)]
    if not runs:
        raise ParseError(command, "it printed no 'IoType: ... XferType: ...' result line")
    return runs


class NvfsStats(BaseModel):
    """nvidia-fs's cumulative read and write counts; None where the driver's rw stats are off."""

    reads_ok: int | None = None
    writes_ok: int | None = None
    read_err: int = 0
    write_err: int = 0


def _counter(text: str, row: str, key: str) -> int | None:
    m = re.search(rf"^{row}\s*:[^\n]*?\b{key}=(\d+)", text, re.MULTILINE)
    return int(m.group(1)) if m else None


def parse_nvfs_stats(text: str, path: str) -> NvfsStats:
    """The counters of /proc/driver/nvidia-fs/stats; ParseError when it holds no Reads row."""
    if not re.search(r"^Reads\s*:", text, re.MULTILINE):
        raise ParseError(path, "no 'Reads :' row")
    return NvfsStats(reads_ok=_counter(text, "Reads", "ok"),
                     writes_ok=_counter(text, "Writes", "ok"),
                     read_err=_counter(text, "Reads", "err") or 0,
                     write_err=_counter(text, "Writes", "err") or 0)


def parse_ip_addresses(text: str, command: str) -> dict[str, list[str]]:
    """Interface -> its IP addresses, from `ip -j addr show` (iproute2)."""
    document = json_document(text, command)
    if not isinstance(document, list):
        raise ParseError(command, "not a JSON list of interfaces")
    return {str(i.get("ifname", "")): [str(a.get("local")) for a in i.get("addr_info") or []
                                       if a.get("local")] for i in document if isinstance(i, dict)}
