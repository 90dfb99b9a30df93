"""Arms (DESIGN §5): the endpoints or launched engines compared by G2/G3, and their KV directories.

A launched arm runs as a child in its own process group, logs to a file kept as evidence, and
is stopped (SIGTERM, then SIGKILL) on every way out, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import ctypes
import difflib
import http.client
import os
import re
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from ._attribution import ADAPTERS
from ._loadgen import Endpoint
from ._units import Duration, format_duration

ARM_NAMES = ("baseline", "candidate", "recompute", "control")
PLACEHOLDERS = ("kv_dir", "port", "model", "run_id", "python")
ENGINES = ("auto", *ADAPTERS)
LAUNCH_HOST = "127.0.0.1"  # launched arms serve on loopback only
MARKER = ".kvgate-kv-dir"  # kvgate empties only KV directories that carry this file
TAIL_LINES = 40
# Keys that belong to one kind only: a launch arm with urls (or the reverse) is a mistake.
_ONLY = {"endpoint": {"urls", "metrics_urls"},
         "launch": {"command", "env", "port", "stop_timeout"}}


class _Strict(BaseModel):
    # Same rules as _settings.Strict; not imported from there because _settings imports us.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def placeholders(text: str) -> list[str]:
    """The {names} used in a template; ValueError for unknown names, format specs or bad braces."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(f"{exc} in {text!r} (write a literal brace as {{{{ or }}}})") from None
    names = []
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {{{name}}} (known: "
                             + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS) + ")")
        if spec or conversion:
            raise ValueError(f"placeholder {{{name}}} takes no format spec or conversion")
        names.append(name)
    return names


def _die_with_parent() -> None:
    # Linux: the engine gets SIGTERM if kvgate is killed (kill -9 included), so a crashed run
    # leaves no orphan serving stale KV; elsewhere this is a no-op.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def render(text: str, values: Mapping[str, str]) -> str:
    """Fill a template's placeholders; literal text (and {{ }}) is kept as written."""
    return "".join(literal + ("" if name is None else values[name])
                   for literal, name, _, _ in string.Formatter().parse(text))


class Arm(_Strict):
    """One side of the comparison: endpoints someone else runs, or a command kvgate launches."""

    kind: Literal["endpoint", "launch"]
    engine: str = "auto"  # metrics adapter (gates._attribution), "auto" = detect
    model: str = ""
    api: Literal["completions", "chat"] = "completions"
    api_key_env: str = ""  # environment variable holding the API key, never the key itself
    kv_dir: Path | None = None  # None = no storage tier (the recompute arm)
    kv_root: Path | None = None  # a further directory kv_dir may be emptied inside
    health_path: str = "/health"
    metrics_path: str = "/metrics"
    startup_timeout: Duration = Field(default=600.0, gt=0)  # big models load for minutes
    urls: list[str] = []  # endpoint: base URLs, one per serving instance
    metrics_urls: list[str] = []  # endpoint: [] = each URL + metrics_path
    command: list[str] = []  # launch: argv template
    env: dict[str, str] = {}  # launch: added to kvgate's own environment
    port: int = Field(default=0, ge=0, lt=65536)  # launch: 0 = a free loopback port
    stop_timeout: Duration = Field(default=30.0, gt=0)  # launch: SIGTERM to SIGKILL

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        if value not in ENGINES:
            raise ValueError(f"unknown engine {value!r} (known: {', '.join(ENGINES)})")
        return value

    @field_validator("health_path", "metrics_path")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/', e.g. \"/health\"")
        return value

    @field_validator("urls", "metrics_urls")
    @classmethod
    def _http_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{url!r} is not an http(s) URL such as http://10.0.0.5:8000")
        return urls

    @model_validator(mode="after")
    def _fits_kind(self) -> Arm:
        other = "launch" if self.kind == "endpoint" else "endpoint"
        wrong = sorted(self.model_fields_set & _ONLY[other])
        if wrong:
            raise ValueError(f"{', '.join(wrong)} belong(s) to kind = \"{other}\" arms, "
                             f"not kind = \"{self.kind}\"")
        if self.kind == "endpoint":
            if not self.urls:
                raise ValueError('an endpoint arm needs urls = ["http://HOST:PORT", ...]')
            return self
        if not self.command:
            raise ValueError('a launch arm needs command = ["program", "arg", ...]')
        used: set[str] = set()
        fields = [(f"command[{i}]", c) for i, c in enumerate(self.command)]
        for where, text in fields + [(f"env.{k}", v) for k, v in self.env.items()]:
            try:
                used.update(placeholders(text))
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        if "kv_dir" in used and self.kv_dir is None:
            raise ValueError("the template uses {kv_dir} but the arm sets no kv_dir")
        if "model" in used and not self.model:
            raise ValueError("the template uses {model} but the arm sets no model")
        if self.port == 0 and "port" not in used:
            raise ValueError("port = 0 picks a free port, but the template never passes {port} "
                             "to the server: use {port} or set a fixed port")
        return self

    def resolve_paths(self, base: Path) -> None:
        """Make kv_dir and kv_root absolute, relative to the site file's folder."""
        for key in ("kv_dir", "kv_root"):
            path = getattr(self, key)
            if path is not None:
                path = path.expanduser()
                setattr(self, key, path if path.is_absolute() else base / path)


def _known_names(arms: dict[str, Arm]) -> dict[str, Arm]:
    for name in arms:
        if name not in ARM_NAMES:
            close = difflib.get_close_matches(name, ARM_NAMES, n=1)
            hint = f" — did you mean '{close[0]}'?" if close else ""
            raise ValueError(f"unknown arm '{name}'{hint} (arms are {', '.join(ARM_NAMES)})")
    return arms


Arms = Annotated[dict[str, Arm], AfterValidator(_known_names)]


def validate_arms(arms: Mapping[str, Arm], required: Sequence[str] = ("candidate",)) -> list[str]:
    """Problems that make these arms unfit for a gate that needs the required arms; [] = fine."""
    problems = [f"unknown arm '{n}' (arms are {', '.join(ARM_NAMES)})"
                for n in arms if n not in ARM_NAMES]
    problems += [f"site defines no {n} arm: add [arms.{n}]" for n in required if n not in arms]
    if "recompute" in arms and arms["recompute"].kv_dir is not None:
        problems.append("arms.recompute sets kv_dir: the recompute arm runs without a KV tier")
    seen: dict[Path, str] = {}
    for name, arm in arms.items():
        if arm.kv_dir is not None:
            if arm.kv_dir in seen:
                problems.append(f"arms {seen[arm.kv_dir]} and {name} share kv_dir {arm.kv_dir}: "
                                "each arm needs its own KV directory")
            seen.setdefault(arm.kv_dir, name)
    return problems


class ArmError(Exception):
    """An arm failed in a phase (start, a run phase, stop, prepare); carries the log tail."""

    def __init__(self, arm: str, phase: str, message: str, exit_code: int | None = None,
                 log_tail: str = "", log_path: Path | None = None):
        self.arm, self.phase, self.exit_code = arm, phase, exit_code
        self.log_tail, self.log_path = log_tail, log_path
        text = f"arm '{arm}' ({phase}): {message}"
        if log_tail:
            text += f"\n--- last lines of {log_path} ---\n{log_tail}"
        super().__init__(text)


# ---- KV directory ----------------------------------------------------------------------

class KvDir(BaseModel):
    """What prepare_kv_dir did, for the record."""

    path: Path
    created: bool
    removed_files: int
    removed_bytes: int
    free_bytes: int


def _mount_points(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Path]:
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    # Field 5 is the mount point, with space, tab, newline and backslash as octal escapes.
    return [Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]))
            for line in lines if len(line.split()) > 4]


def _tally(entry: os.DirEntry) -> tuple[int, int]:
    """Files (symbolic links included, never followed) and bytes under one entry."""
    if not entry.is_dir(follow_symlinks=False):
        return 1, entry.stat(follow_symlinks=False).st_size
    files = nbytes = 0
    for dirpath, dirnames, filenames in os.walk(entry.path):
        paths = [os.path.join(dirpath, n) for n in filenames + dirnames]
        leaves = [p for p in paths if os.path.islink(p) or not os.path.isdir(p)]
        files, nbytes = files + len(leaves), nbytes + sum(os.lstat(p).st_size for p in leaves)
    return files, nbytes


def prepare_kv_dir(name: str, arm: Arm, allowed_roots: Path | Sequence[Path] | None,
                   mountinfo: Path = Path("/proc/self/mountinfo")) -> KvDir | None:
    """Empty the arm's KV directory (creating it if missing); None when the arm has no tier."""
    if arm.kv_dir is None:
        return None
    given = arm.kv_dir

    def refuse(why: str) -> ArmError:
        return ArmError(name, "prepare", f"refusing to empty KV directory {given}: {why} "
                        f"(site.toml [arms.{name}] kv_dir)")

    roots = [allowed_roots] if isinstance(allowed_roots, Path) else list(allowed_roots or [])
    roots += [arm.kv_root] if arm.kv_root is not None else []
    if not given.is_absolute():
        raise refuse("not an absolute path")
    real = Path(os.path.realpath(given))  # judge where a symbolic link really leads
    home = Path(os.path.realpath(Path.home()))
    mounts = _mount_points(mountinfo)
    if real == Path("/"):
        raise refuse("it is the root directory")
    if real == home or real in home.parents:
        raise refuse(f"it is or holds the home directory {home}")
    if os.path.ismount(real) or real in mounts:
        raise refuse("it is a mount point; use a directory inside the mounted filesystem")
    real_roots = [Path(os.path.realpath(r)) for r in roots]
    if not any(r in real.parents for r in real_roots):
        where = ", ".join(map(str, roots)) or "none given"
        raise refuse(f"kvgate empties only subdirectories of the allowed roots ({where})")
    created, files, nbytes = False, 0, 0
    if real.exists():
        if not real.is_dir():
            raise refuse("it is not a directory")
        inner = [m for m in mounts if real in m.parents]
        if inner:
            raise refuse(f"a filesystem is mounted inside it, at {inner[0]}")
        with os.scandir(real) as listing:
            entries = [e for e in listing if e.name != MARKER]
        if entries and not (real / MARKER).is_file():
            n = len(entries)
            raise refuse(f"it holds {n} entr{'y' if n == 1 else 'ies'} and no {MARKER} file, so "
                         "kvgate did not create it; empty or remove it once yourself and kvgate "
                         "will manage it from then on")
        try:
            for entry in entries:
                count, size = _tally(entry)
                files, nbytes = files + count, nbytes + size
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        except OSError as exc:
            raise ArmError(name, "prepare", f"cannot empty KV directory {real}: {exc}") from None
    else:
        if given.is_symlink():
            raise refuse("it is a dangling symbolic link")
        if not real.parent.is_dir():
            raise refuse(f"its parent {real.parent} does not exist")
        created = True
    marker = real / MARKER
    try:
        real.mkdir(exist_ok=True)
        if not marker.exists():
            marker.write_text(f"KV directory of kvgate arm '{name}': emptied before every run\n")
    except OSError as exc:
        raise ArmError(name, "prepare", f"cannot create KV directory {real}: {exc}") from None
    return KvDir(path=real, created=created, removed_files=files, removed_bytes=nbytes,
                 free_bytes=shutil.disk_usage(real).free)


# ---- processes -------------------------------------------------------------------------

HealthProbe = Callable[[str, float], int]  # (url, timeout) -> HTTP status; OSError if no answer
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # like aiohttp: no proxy


def http_status(url: str, timeout: float) -> int:
    """GET url and return the HTTP status; OSError when nothing answers."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code
    except http.client.HTTPException as exc:  # a garbled answer is no answer
        raise OSError(f"bad HTTP answer: {exc!r}") from None


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind((LAUNCH_HOST, 0))
        return sock.getsockname()[1]


def port_taken(port: int) -> bool:
    """Whether something listens on the loopback port (TIME_WAIT leftovers do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LAUNCH_HOST, port))
        except OSError:
            return True
    return False


def _exited(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ArmProcess:
    """A started arm: a child process group kvgate owns, or endpoints someone else runs."""

    def __init__(self, name: str, arm: Arm, log_path: Path | None = None, *, run_id: str = "",
                 probe: HealthProbe = http_status, poll: float = 0.1):
        if arm.kind == "launch" and log_path is None:
            raise ValueError(f"arm '{name}' is launched: it needs a log file")
        self.name, self.arm, self.log_path, self.run_id = name, arm, log_path, run_id
        self.port = arm.port
        self.exit_code: int | None = None
        self._probe, self._poll = probe, poll
        self._proc: subprocess.Popen | None = None
        self._log_offset = 0

    def __enter__(self) -> ArmProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """The launched child's pid (also its process group id), None when not running."""
        return self._proc.pid if self._proc else None

    def base_urls(self) -> list[str]:
        """The arm's base URLs (a launched arm's port is known once it has started)."""
        if self.arm.kind == "endpoint":
            return [u.rstrip("/") for u in self.arm.urls]
        if not self.port:
            raise ArmError(self.name, "start", "not started yet: its port is not chosen")
        return [f"http://{LAUNCH_HOST}:{self.port}"]

    def metrics_urls(self) -> list[str]:
        """Where to scrape Prometheus metrics."""
        return self.arm.metrics_urls or [u + self.arm.metrics_path for u in self.base_urls()]

    def endpoints(self) -> list[Endpoint]:
        """One load-generator Endpoint per serving instance."""
        key = self._api_key("endpoints")
        return [Endpoint(url=u, model=self.arm.model, api=self.arm.api, api_key=key)
                for u in self.base_urls()]

    def command(self) -> tuple[list[str], dict[str, str]]:
        """The launch argv and the environment additions, placeholders filled in."""
        kv_dir = "" if self.arm.kv_dir is None else str(self.arm.kv_dir)
        values = {"kv_dir": kv_dir, "port": str(self.port), "model": self.arm.model,
                  "run_id": self.run_id, "python": sys.executable}
        return ([render(c, values) for c in self.arm.command],
                {k: render(v, values) for k, v in self.arm.env.items()})

    def alive(self) -> bool:
        """A launched child still running; for endpoints, every health URL answering 200."""
        if self.arm.kind == "endpoint":
            return all(self._status(u)[0] == 200 for u in self._health_urls())
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> ArmProcess:
        """Launch the arm (or check an endpoint arm) and return once its health URL gives 200."""
        self._api_key("start")
        if self.arm.kind == "endpoint":
            self.check("start")
            return self
        if self.alive():
            return self
        if not self.port:
            self.port = free_port()
        elif port_taken(self.port):
            raise ArmError(self.name, "start", f"port {self.port} on {LAUNCH_HOST} is already in "
                           "use (another server, or an arm left from an earlier run?)")
        argv, extra = self.command()
        # Python engines (vLLM, SGLang) would otherwise hold their last words in a buffer.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra}
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            log.write(f"=== kvgate: arm {self.name} starting {when}: {' '.join(argv)}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True,
                                              preexec_fn=_die_with_parent)
            except OSError as exc:
                raise ArmError(self.name, "start", f"cannot run {argv[0]!r}: "
                               f"{exc.strerror or exc}") from None
        self.exit_code = None
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()  # never leave a half-started engine behind, Ctrl-C included
            raise
        return self

    def _wait_healthy(self) -> None:
        url = self._health_urls()[0]
        timeout = self.arm.startup_timeout
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            self.check("start")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                raise ArmError(self.name, "start", f"GET {url} did not answer 200 within "
                               f"{format_duration(timeout)} (last: {last}); stopped it",
                               None, self.log_tail(), self.log_path)
            status, last = self._status(url, min(remaining, 2.0))
            if status == 200 and self._proc is not None and self._proc.poll() is None:
                return
            time.sleep(min(self._poll, max(deadline - time.monotonic(), 0.0)))

    def check(self, phase: str) -> None:
        """Raise ArmError naming phase if a launched child has exited or an endpoint is down."""
        if self.arm.kind == "endpoint":
            for url in self._health_urls():
                status, detail = self._status(url)
                if status != 200:
                    host = urllib.parse.urlsplit(url).netloc
                    raise ArmError(self.name, phase, f"endpoint {host} is not healthy: GET {url} "
                                   f"gave {detail}")
            return
        if self._proc is None:
            raise ArmError(self.name, phase, "not running", self.exit_code, self.log_tail(),
                           self.log_path)
        code = self._proc.poll()
        if code is not None:
            self.stop()  # reaps it and clears any workers left in its group
            raise ArmError(self.name, phase, _exited(code), code, self.log_tail(), self.log_path)

    def stop(self) -> int | None:
        """SIGTERM the process group, SIGKILL it after stop_timeout; no-op if not running."""
        proc, self._proc = self._proc, None
        if proc is None:
            return self.exit_code
        deadline = time.monotonic() + self.arm.stop_timeout
        try:
            _signal_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.arm.stop_timeout)
            # Workers the engine forked into its group get what is left of the grace time.
            while _signal_group(proc.pid, 0) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            _signal_group(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # stuck in the kernel (D state)
                raise ArmError(self.name, "stop", f"pid {proc.pid} survived SIGKILL") from None
        self.exit_code = proc.returncode
        return self.exit_code

    def restart(self) -> ArmProcess:
        """Stop and start again on the same port: empties every cache in the engine's memory."""
        if self.arm.kind == "endpoint":
            raise ArmError(self.name, "restart", "kvgate cannot restart an endpoint arm someone "
                           "else runs; evict by resetting the prefix cache instead")
        self.stop()
        return self.start()

    def log_tail(self, lines: int = TAIL_LINES) -> str:
        """The last lines this start wrote to the log."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self._log_offset, size - 64 * 1024))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _health_urls(self) -> list[str]:
        return [u + self.arm.health_path for u in self.base_urls()]

    def _status(self, url: str, timeout: float | None = None) -> tuple[int | None, str]:
        try:
            status = self._probe(url, timeout or min(self.arm.startup_timeout, 10.0))
        except OSError as exc:
            return None, str(getattr(exc, "reason", None) or exc)
        return status, f"HTTP {status}"

    def _api_key(self, phase: str) -> SecretStr | None:
        if not self.arm.api_key_env:
            return None
        key = os.environ.get(self.arm.api_key_env)
        if key is None:
            raise ArmError(self.name, phase, f"environment variable {self.arm.api_key_env} "
                           "(api_key_env) is not set")
        return SecretStr(key)
