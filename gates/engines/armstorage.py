"""Each arm's storage, read once before G3's pairs: the KV-restore job in the arm's kv_dir.

The same short read G2 and G3 take of the target between repetitions (gates.storage.devref:
random kv_block reads, kv_jobs x kv_iodepth, O_DIRECT, on this machine), here in the baseline's
KV directory as much as in the candidate's, so that the two bandwidths compare like with like
and the KV model can bound the gain storage alone explains (gates.engines.fairness).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..core.configuration import ArmError, Site
from ..inference import prepare_kv_dir
from ..storage import DeviceReader, SubprocessRunner
from .fairness import ArmStorage
from .runner import RunContext

# The folder the reading's file is written in, inside the arm's KV directory (or the target),
# removed with it after the read.
FOLDER = "kvgate-arm-storage"


def arm_storage(run: RunContext, site: Site, arms: tuple[str, ...],
                seconds: float) -> dict[str, ArmStorage]:
    """Each arm's read bandwidth where its KV lives (the candidate without a kv_dir: the
    target); an arm without one has none; a reading that failed says why."""
    out = {}
    for name in arms:
        arm = site.arms[name]
        where = arm.kv_dir or (site.target.directory if name == "candidate" else None)
        if where is None:
            out[name] = ArmStorage(arm=name)
        elif seconds <= 0:
            out[name] = ArmStorage(arm=name, directory=str(where),
                                   error="not read (g3.arm_storage_reference = 0s)")
        else:
            out[name] = _read(run, site, name, seconds)
    return out


def _read(run: RunContext, site: Site, name: str, seconds: float) -> ArmStorage:
    arm = site.arms[name]
    try:
        # The KV directory as the arm's runs find it (emptied, created): the reading's file is
        # written inside the directory kvgate manages, never beside it.
        kv = prepare_kv_dir(name, arm, site.target.directory)
    except ArmError as exc:
        return ArmStorage(arm=name, directory=str(arm.kv_dir), error=str(exc))
    where = kv.path if kv is not None else Path(site.target.directory)
    folder = where / FOLDER
    try:
        folder.mkdir(exist_ok=True)
        reader = DeviceReader(runner=SubprocessRunner(), fio=site.fio, target=folder,
                              evidence_dir=run.evidence_dir, seconds=seconds,
                              keep=run.add_evidence, label=f"g3-storage-{name}")
        speed, error = reader()
    except OSError as exc:
        speed, error = None, f"cannot write {folder}: {exc.strerror or exc}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return ArmStorage(arm=name, directory=str(where), bytes_per_s=speed, error=error)
