"""The KV device as a control: G1's KV-restore job in a short form, read between repetitions.

G2 and G3 time a fixed CPU workload around every repetition (gates.inference.machine); this is
the same for the disk the baseline's KV files live on: a short random read of KV-chunk-sized
blocks (site.toml [fio] kv_block, kv_jobs, kv_iodepth: G1's "kvrestore" job) from one file
written once in the target, with O_DIRECT so the page cache cannot answer. When that read's
speed moved between repetitions by more than [g2] device_speed_variation_max, a G2 stability
failure is the device's moving, not the baseline's, and G2 says so (INCONCLUSIVE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.configuration import FioSettings
from .fio import combine
from .fiorun import run_step
from .jobs import FioStep, JobSection
from .runner import CommandRunner

REFERENCE_FILE = "kvgate-devref.dat"
# Large enough that random KV-block reads over it are not one track of the device's own cache,
# small enough to write in well under a second on any disk a gate runs on.
REFERENCE_BYTES = 64 * 1024**2


def reference_steps(fio: FioSettings, seconds: float) -> tuple[FioStep, FioStep]:
    """The file written once, and the timed read of it (G1's KV-restore pattern, shortened)."""
    size = str(REFERENCE_BYTES)
    write = FioStep(key="devref-write", title="KV device reference: write its file once",
                    seconds=1.0, direction="write", jobs=[JobSection(name="devref-write", options={
                        "rw": "write", "filename": REFERENCE_FILE, "bs": str(fio.seq_block),
                        "size": size})])
    read = FioStep(key="devref", title="KV device reference: random reads of KV-chunk blocks",
                   seconds=seconds, jobs=[JobSection(name="devref", options={
                       "rw": "randread", "filename": REFERENCE_FILE,
                       "bs": str(min(fio.kv_block, REFERENCE_BYTES)),
                       "iodepth": str(fio.kv_iodepth), "numjobs": str(fio.kv_jobs),
                       "group_reporting": "1", "size": size, "time_based": "1",
                       "runtime": f"{seconds:g}s"})])
    return write, read


@dataclass
class DeviceReader:
    """Reads the KV device's speed in ``target`` (call it: bytes/s, or the reason it cannot).

    Always on this machine (never fio's --client hosts: the engine reads its KV here) and
    always O_DIRECT. Each reading's job file, JSON and log go to ``evidence_dir`` and are
    handed to ``keep`` (the run's manifest), numbered in the order they were read.
    """

    runner: CommandRunner
    fio: FioSettings
    target: Path
    evidence_dir: Path
    seconds: float
    keep: Callable[[Path], object] | None = None
    label: str = "devref"
    readings: int = 0
    _written: bool = False

    def _settings(self) -> FioSettings:
        return self.fio.model_copy(update={"hosts": [], "direct": True})

    def _step(self, step: FioStep) -> tuple[float | None, str]:
        self.readings += 1
        step = step.model_copy(update={"key": f"{self.label}-{self.readings}"})
        run = run_step(self.runner, step, self._settings(), self.target, self.evidence_dir)
        for path in run.evidence:
            if self.keep is not None:
                self.keep(path)
        if not run.ok or run.report is None:
            return None, run.error or "fio gave no report"
        speed = combine(run.report.entries(), "read").bw_bytes
        return speed, ""

    def __call__(self) -> tuple[float | None, str]:
        """One reading: (bytes per second, "") or (None, why not)."""
        write, read = reference_steps(self.fio, self.seconds)
        if not self._written:
            _, error = self._step(write)
            if error:
                return None, f"the KV device reference could not write its file: {error}"
            self._written = True
        speed, error = self._step(read)
        if error:
            return None, f"the KV device reference could not read: {error}"
        if not speed or speed <= 0:
            return None, "the KV device reference read nothing (fio's bandwidth was 0)"
        return speed, ""
