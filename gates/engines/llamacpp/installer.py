"""`kvgate engine install llamacpp`: build llama.cpp's server from PyPI source, write the model.

Download-free apart from PyPI: the llama-cpp-python sdist vendors llama.cpp, which cmake
builds (CPU only, no CURL, no OpenSSL, no web UI download) into a cache directory outside the
checkout, ~/.cache/kvgate/llamacpp/<version>/, reused when present. install.json is written
last, so a half-finished install is never taken for a working one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ...core.configuration import LLAMACPP_PINNED
from ..installs import InstallError, cache_root, run_step, short_of_space
from .model import EXTRA, ModelShape, write_tiny_gguf

PACKAGE = "llama-cpp-python"
PINNED = LLAMACPP_PINNED
MANIFEST = "install.json"
SERVER = "llama-server"
MODEL = "tiny-llama-f32.gguf"
# The cheapest build that serves: one target, static, no tests/examples/app, no network code.
# ggml's kernels (the inference) keep -O3; the server, chat templates, multimodal and JSON
# code around them build at -O1: the same tokens/s, the build in 40 % of the time (measured).
OPT = "-O1"
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_OPENSSL=OFF",
               "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
               "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DGGML_NATIVE=ON",
               "-DGGML_BACKEND_DL=OFF", f"-DCMAKE_C_FLAGS_RELEASE={OPT} -DNDEBUG",
               f"-DCMAKE_CXX_FLAGS_RELEASE={OPT} -DNDEBUG"]
GGML_FLAGS = ('set(CMAKE_C_FLAGS_RELEASE "-O3 -DNDEBUG")\n'
              'set(CMAKE_CXX_FLAGS_RELEASE "-O3 -DNDEBUG")\n')


class LlamaCppInstall(BaseModel):
    """A built llama-server and its tiny model, as install.json records them."""

    version: str  # llama-cpp-python release the source came from
    directory: Path
    server: Path
    model: Path
    server_version: str = ""  # `llama-server --version`
    shape: ModelShape = ModelShape()
    cmake_flags: list[str] = []
    build_seconds: float = 0.0

    def usable(self) -> bool:
        """Whether the binary and the model are still where install.json says."""
        return os.access(self.server, os.X_OK) and self.model.is_file()

    def describe(self) -> str:
        """One line for reports: what engine, from which source."""
        build = f" ({self.server_version})" if self.server_version else ""
        return f"llama.cpp llama-server{build}, vendored in {PACKAGE} {self.version}"


def install_dir(version: str = PINNED, root: Path | None = None) -> Path:
    """The cache directory of one llama.cpp version."""
    return (root or cache_root()) / "llamacpp" / version


def find_install(version: str = PINNED, root: Path | None = None) -> LlamaCppInstall | None:
    """The usable install of that version, or None (missing, half-built or moved)."""
    manifest = install_dir(version, root) / MANIFEST
    try:
        found = LlamaCppInstall.model_validate_json(manifest.read_text())
    except (OSError, ValidationError):
        return None
    # Built by another recipe (an older kvgate): rebuild rather than measure something else.
    return found if found.usable() and found.cmake_flags == CMAKE_FLAGS else None


def fetch_source(version: str, work: Path, log: Path) -> Path:
    """pip-download the sdist and unpack it; returns the vendored llama.cpp tree."""
    run_step("download the sdist from PyPI", [sys.executable, "-m", "pip", "download", "--no-deps",
                                          "--no-binary", ":all:", f"{PACKAGE}=={version}",
                                          "-d", str(work)], log)
    archives = sorted(work.glob("llama_cpp_python-*.tar.gz"))
    if not archives:
        raise InstallError(f"pip download left no llama_cpp_python-*.tar.gz in {work} ({log})")
    with tarfile.open(archives[0]) as tar:
        # The "data" filter refuses links and paths out of work (Python >= 3.11.4 has it).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(work, **safe)
    tree = work / archives[0].name.removesuffix(".tar.gz") / "vendor" / "llama.cpp"
    if not (tree / "CMakeLists.txt").is_file():
        raise InstallError(f"{archives[0].name} has no vendor/llama.cpp/CMakeLists.txt")
    return tree


def build_server(tree: Path, build: Path, jobs: int, log: Path) -> Path:
    """cmake-configure and build the llama-server target only; returns the binary."""
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    launcher = ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] \
        if shutil.which("ccache") else []
    build.mkdir(parents=True, exist_ok=True)
    ggml = build / "kvgate-ggml-flags.cmake"  # runs inside ggml's project(): its flags only
    ggml.write_text(GGML_FLAGS)
    run_step("cmake configure", ["cmake", "-S", str(tree), "-B", str(build), *generator,
                             *CMAKE_FLAGS, f"-DCMAKE_PROJECT_ggml_INCLUDE={ggml}", *launcher],
         log)
    run_step("cmake build", ["cmake", "--build", str(build), "--target", SERVER, "-j", str(jobs)],
         log)
    binary = build / "bin" / SERVER
    if not binary.is_file():
        raise InstallError(f"the build finished but {binary} is missing ({log})")
    return binary


def server_version(server: Path) -> str:
    """`llama-server --version`, first line that names the version ("" if it will not say)."""
    try:
        done = subprocess.run([str(server), "--version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if "version" in ln]
    return lines[0] if lines else ""


# The source tree and the build's objects (~1 GB, removed after) beside the 340 MB install;
# the compiler's temporary files land in $TMPDIR, on the same disk here.
NEED_FREE = 2 * 1024**3


def preflight(home: Path | None = None) -> list[str]:
    """What the build would miss (cmake, a C++ compiler, the gguf package, free space in home,
    when given); [] = all there."""
    missing = [] if shutil.which("cmake") else ["cmake (apt-get install cmake)"]
    if home is not None and (short := short_of_space(home, NEED_FREE)):
        missing.append(short)
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        missing.append("a C++ compiler (apt-get install g++)")
    try:
        import gguf  # noqa: F401 - only asking whether it is there
    except ImportError:
        missing.append(f"the gguf package: {EXTRA}")
    return missing


def install(version: str = PINNED, jobs: int = 2, root: Path | None = None,
            force: bool = False, say=print) -> LlamaCppInstall:
    """Build llama-server and write the tiny model, unless a usable install is there."""
    found = None if force else find_install(version, root)
    if found is not None:
        say(f"already installed: {found.describe()} in {found.directory}")
        return found
    home = install_dir(version, root)
    missing = preflight(home)
    if missing:  # say so now, not after a minutes-long build
        raise InstallError("cannot build llama.cpp: missing " + "; ".join(missing))
    work = home / "work"
    shutil.rmtree(work, ignore_errors=True)
    (home / MANIFEST).unlink(missing_ok=True)
    work.mkdir(parents=True)
    log = home / "install.log"
    log.write_text(f"kvgate engine install llamacpp {version}\n")
    started = time.monotonic()
    say(f"building llama-server from {PACKAGE} {version} in {home} (log: {log}); "
        f"about 3-4 minutes on 2 cores")
    tree = fetch_source(version, work, log)
    binary = build_server(tree, work / "build", jobs, log)
    (home / "bin").mkdir(exist_ok=True)
    server = home / "bin" / SERVER
    shutil.copy2(binary, server)
    built = time.monotonic() - started
    shape = ModelShape()
    say(f"built in {built:.0f} s; writing the tiny random-weight model")
    write_tiny_gguf(home / MODEL, shape)
    done = LlamaCppInstall(version=version, directory=home, server=server, model=home / MODEL,
                           server_version=server_version(server), shape=shape,
                           cmake_flags=CMAKE_FLAGS, build_seconds=round(built, 1))
    shutil.rmtree(work, ignore_errors=True)  # source and objects: 1 GB nobody needs again
    (home / MANIFEST).write_text(done.model_dump_json(indent=1))
    say(f"installed: {done.describe()}")
    return done
