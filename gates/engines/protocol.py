"""The G2/G3 protocol: per arm and concurrency, R cold-recovery repetitions on a fresh arm."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from ..core.configuration import Arm, ArmError, WorkloadSettings, real_path
from ..core.quantities import format_size
from ..core.verdicts import RequestRecord
from ..inference import (
    ArmProcess,
    PhaseError,
    Repetition,
    evict,
    prepare_kv_dir,
    repetition,
    run_cold_recovery,
    stored_bytes,
)
from ..loadgen import LoadSettings, cpu_snapshot, cpu_use, workload_plan
from ..proof import AttributionError, PsutilDiskCounters, SysfsCounters, double_counted
from .llamacpp import run_slot_cold_recovery

# Engines behind vLLM's own API server: its completion protocol returns the output's token ids
# and logprobs when asked (vllm/entrypoints/openai/completion/protocol.py), for correctness.
VLLM_API = ("vllm", "lmcache", "vllm-native")
# Engines asked for each output token's id and top-k logprobs by token id, which G3's near-tie
# rule reads (gates.loadgen.logprobs cites each server's format): vLLM's API server,
# llama.cpp's server (logprobs = n_probs) and kvgate's simulator. Others are not asked, and no
# divergence of theirs is excused as a tie.
OUTPUT_DETAIL = (*VLLM_API, "llamacpp", "kvgate-sim")


class ProtocolError(Exception):
    """An arm could not be measured; the message names the arm, the phase and the log tail."""


def start_arm(name: str, arm: Arm, log: Path, run_id: str,
              kv_root: Path | None = None) -> ArmProcess:
    """Start an arm kept for all its repetitions; ProtocolError with its log tail if it fails."""
    try:
        prepare_kv_dir(name, arm, kv_root)  # before the engine can write into it
        return ArmProcess(name, arm, log, run_id=run_id).start()
    except ArmError as exc:  # it names the arm and the phase already
        raise ProtocolError(str(exc)) from None


def kv_devices(arm: Arm, configured: list[str]) -> list[str]:
    """Block devices whose read bytes should rise in the probe: configured, or the kv_dir's.

    The kv_dir is judged where it really leads (`..` and links resolved); a launched arm's KV
    directory that cannot be found is an error naming it, never a device-read signal dropped.
    """
    if configured:
        return configured
    if arm.kind != "launch" or arm.kv_dir is None:
        return []  # an engine on another host reads from disks this host cannot see
    try:
        st = os.stat(real_path(arm.kv_dir))
    except OSError as exc:
        raise ProtocolError(f"kv_dir {arm.kv_dir}: cannot find the block device whose reads "
                            f"the proof watches: {exc.strerror or exc}") from None
    node = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    return [Path(os.path.realpath(node)).name] if node.exists() else []


def devices_unwatched(arm: Arm, watched: list[str]) -> str:
    """Why the block devices under a launched arm's kv_dir cannot be watched; "" when they
    are, or when the arm is not on this host (its disks were never this host's to watch).

    A filesystem on no local block device (tmpfs, overlay, FUSE, NFS; btrfs's anonymous device
    numbers too) could not be watched: the proof says so, it does not "not apply".
    """
    if watched or arm.kind != "launch" or arm.kv_dir is None:
        return ""
    path = real_path(arm.kv_dir)
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"kv_dir {path}: {exc.strerror or exc}"
    number = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    return (f"kv_dir {path} is on {_fstype(number) or 'a filesystem'} (device {number}), "
            "with no local block device whose I/O counters kvgate can read")


def _fstype(number: str, mountinfo: Path = Path("/proc/self/mountinfo")) -> str:
    """The filesystem type mounted as device ``major:minor`` (proc(5) mountinfo), or ""."""
    try:
        lines = mountinfo.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[2] == number and "-" in fields[6:]:
            dash = fields.index("-", 6)
            return fields[dash + 1] if len(fields) > dash + 1 else ""
    return ""


def run_arm_once(name: str, arm: Arm, workload: WorkloadSettings, concurrency: int, index: int,
                 *, log: Path, kv_root: Path | None, run_id: str,
                 on_record: Callable[[RequestRecord], None] | None = None,
                 output_tokens: int | None = None, devices: list[str] = (),
                 kv_bytes_per_token: int | None = None, interfaces: list[str] = (),
                 rdma_devices: list[str] = (), process: ArmProcess | None = None) -> Repetition:
    """Empty the arm's KV directory, start the arm, run one cold recovery, stop the arm.

    A running ``process`` (start_arm) is used instead and left running, reset first: its
    prefix cache emptied, as a fresh start would have it.
    """
    try:
        kv = prepare_kv_dir(name, arm, kv_root)
        if kv is not None and kv_bytes_per_token:
            need = workload_plan(workload).total_expected_kv_tokens * kv_bytes_per_token
            if need > kv.free_bytes:
                raise ProtocolError(
                    f"arm '{name}': the workload needs {format_size(need)} of KV "
                    f"({workload.contexts} contexts x {workload.context_tokens} tokens x "
                    f"{kv_bytes_per_token} B/token) but {kv.path} has only "
                    f"{format_size(kv.free_bytes)} free; nothing was started")
        watched = kv_devices(arm, list(devices))
        unwatched = devices_unwatched(arm, watched)
        if twice := double_counted(watched):
            raise ProtocolError(f"arm '{name}': [topology] devices: {twice}")
        kept = process is not None
        with nullcontext(process) if kept else ArmProcess(name, arm, log, run_id=run_id) \
                as process:
            settings = LoadSettings(concurrency=concurrency, stall_timeout=workload.stall_timeout,
                                    output_detail=arm.engine in OUTPUT_DETAIL)
            if kept:
                asyncio.run(evict(process.endpoints(), "reset", workload_plan(workload), settings))
            cpu_before = cpu_snapshot(process.pid)
            eviction = "reset" if workload.eviction == "restart" else workload.eviction
            restart = process.restart if workload.eviction == "restart" else None
            disks = PsutilDiskCounters() if watched else None
            # NVMe-oF: the storage NICs' and RDMA ports' receive bytes carry the KV reads.
            nics = SysfsCounters(interfaces, rdma_devices) if interfaces or rdma_devices \
                else None
            if arm.engine == "llamacpp":  # slot files: save, erase, restore (engines.llamacpp)
                cold = asyncio.run(run_slot_cold_recovery(
                    workload_plan(workload, output_tokens), process.endpoints(), settings,
                    kv_dir=kv.path if kv is not None else None, pid=process.pid,
                    on_record=on_record, disks=disks, devices=watched, evict_hook=restart,
                    erase=workload.eviction != "none", write_quiet=arm.write_quiet))
            else:
                cold = asyncio.run(run_cold_recovery(
                    workload_plan(workload, output_tokens), process.endpoints(), settings,
                    engine=arm.engine, eviction=eviction, on_record=on_record, disks=disks,
                    devices=watched, evict_hook=restart, metrics_urls=process.metrics_urls(),
                    nics=nics, block_tokens=arm.kv_block_tokens,
                    kv_dir=kv.path if kv is not None else None, pid=process.pid,
                    write_quiet=arm.write_quiet))
            cpu = cpu_use(cpu_before, cpu_snapshot(process.pid))
    except (ArmError, PhaseError, AttributionError) as exc:
        tail, said = "", process.log_path if process is not None else log
        if isinstance(exc, PhaseError) and said is not None and said.exists():
            # The engine may have died mid-run: its own last words say why.
            tail = "\nlast lines of the engine's log:\n" + "\n".join(
                said.read_text(errors="replace").splitlines()[-20:])
        raise ProtocolError(f"arm '{name}' at concurrency {concurrency}, repetition {index + 1}: "
                            f"{exc}{tail}") from None
    rep = repetition(name, concurrency, index, cold).model_copy(update={"cpu": cpu})
    if kv is not None:  # where the KV really is: the files the engine left in its kv_dir
        rep = rep.model_copy(update={"evidence": rep.evidence.model_copy(update={
            "kv_dir": str(kv.path), "kv_dir_bytes": stored_bytes(kv.path),
            "devices_unwatched": unwatched})})
    return rep
