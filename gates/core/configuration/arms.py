"""Arms (DESIGN §5): the endpoints or launched engines compared by G2/G3, as site settings.

KV-directory safety lives in gates.inference.kv_dir, launched engines in gates.inference.process.
"""

from __future__ import annotations

import difflib
import os
import string
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PositiveInt,
    field_validator,
    model_validator,
)

from ..quantities import Duration, Size
from .strict import Strict

ARM_NAMES = ("baseline", "candidate", "recompute", "control")
# {gpu_cache} and {cpu_tier}: the arm's keys in bytes ({cpu_tier} 0 when it has none), so a
# launched engine is given the tiers kvgate's proof and the sweep's chart hold it to.
PLACEHOLDERS = ("kv_dir", "port", "model", "run_id", "python", "gpu_cache", "cpu_tier")
# The metrics adapters of gates.proof.attribution, one per engine family; "auto" detects.
ADAPTER_NAMES = ("vllm", "lmcache", "vllm-native", "sglang", "dynamo-kvbm", "llamacpp",
                 "kvgate-sim")
ENGINES = ("auto", *ADAPTER_NAMES)
# Keys that belong to one kind only: a launch arm with urls (or the reverse) is a mistake.
_ONLY = {"endpoint": {"urls", "metrics_urls"},
         "launch": {"command", "env", "port", "stop_timeout", "cpus"}}


def _not_empty(value: object) -> object:
    # Path("") is ".": relative to the site file's folder, an empty key would quietly name
    # that folder (a target, a KV directory kvgate empties, a catalogue).
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{value!r} is empty, which would be read as the site file's own "
                         "folder: write the path, or leave the key out")
    return value


WrittenPath = Annotated[Path, BeforeValidator(_not_empty)]


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


def render(text: str, values: Mapping[str, str]) -> str:
    """Fill a template's placeholders; literal text (and {{ }}) is kept as written."""
    return "".join(literal + ("" if name is None else values[name])
                   for literal, name, _, _ in string.Formatter().parse(text))


class Arm(Strict):
    """One side of the comparison: endpoints someone else runs, or a command kvgate launches."""

    kind: Literal["endpoint", "launch"]
    engine: str = "auto"  # metrics adapter (gates.proof.attribution), "auto" = detect
    model: str = ""
    api: Literal["completions", "chat"] = "completions"
    api_key_env: str = ""  # environment variable holding the API key, never the key itself
    kv_dir: WrittenPath | None = None  # None = no storage tier (the recompute arm)
    kv_root: WrittenPath | None = None  # a further directory kv_dir may be emptied inside
    health_path: str = "/health"
    metrics_path: str = "/metrics"
    startup_timeout: Duration = Field(default=600.0, gt=0)  # big models load for minutes
    urls: list[str] = []  # endpoint: base URLs, one per serving instance
    metrics_urls: list[str] = []  # endpoint: [] = each URL + metrics_path
    command: list[str] = []  # launch: argv template
    env: dict[str, str] = {}  # launch: added to kvgate's own environment
    port: int = Field(default=0, ge=0, lt=65536)  # launch: 0 = a free loopback port
    stop_timeout: Duration = Field(default=30.0, gt=0)  # launch: SIGTERM to SIGKILL
    # How long the arm's storage-write counters and KV directory must hold still after the
    # seed before its writes count as done (gates.inference.settle, wait_until_settled):
    # three counter polls and two directory looks a third of it apart. The default is what
    # real connectors were measured to need; kvgate's simulator also says how many writes it
    # has queued, so it may declare less; an engine writing in bursts further apart, more.
    write_quiet: Duration = Field(default=1.5, ge=0.3, le=60.0)
    # Tokens per KV block, for engines whose counters count blocks (Dynamo KVBM: the workers'
    # vLLM --block-size, default 16); None = the engine's counters count tokens.
    kv_block_tokens: PositiveInt | None = None
    # The engine's CPU/DRAM KV tier in front of the storage (LMCache max_local_cpu_size, vLLM
    # native offload's CPU bytes, SGLang's host pool): a tier that could hold the probe's whole
    # working set makes the storage-read proof INCONCLUSIVE. None = none, or not declared.
    cpu_tier: Size | None = None
    # The engine's own GPU (device) KV cache as its configuration sets it (vLLM's
    # gpu_memory_utilization share, the simulator's --gpu-cache): drawn on the sweep's chart,
    # and passed to a launched engine that takes it as {gpu_cache}. None = not declared.
    gpu_cache: Size | None = Field(default=None, gt=0)
    # True: a fresh process for every repetition. False: one process for all of an arm's
    # repetitions in a gate (a server that takes minutes to start), reset between them:
    # its prefix cache emptied and its KV directory emptied.
    fresh_each_repetition: bool = True
    # launch: the CPU cores the engine's processes may run on (sched_setaffinity), e.g. [0] on
    # a 2-core host so a CPU engine leaves the load generator a core; [] = all.
    cpus: list[Annotated[int, Field(ge=0)]] = []
    # The engine's parallelism: tensor, pipeline and data-parallel ranks. G3 holds the ranks
    # its storage counters name against them (gates.proof.labelled_ranks: LMCache one
    # series per TP x PP rank, SGLang per TP x PP x DP rank, vLLM per DP engine); a count
    # that differs is an ERROR naming both.
    tp: PositiveInt = 1
    pp: PositiveInt = 1
    dp: PositiveInt = 1

    @property
    def stays_up(self) -> bool:
        """One server answers every repetition: kept (fresh_each_repetition = false), or
        someone else's endpoint. Its first repetition at a level is not like the next ones."""
        return self.kind == "endpoint" or not self.fresh_each_repetition

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
        if "gpu_cache" in used and self.gpu_cache is None:
            raise ValueError("the template uses {gpu_cache} but the arm sets no gpu_cache")
        if "model" in used and not self.model:
            raise ValueError("the template uses {model} but the arm sets no model")
        if self.port == 0 and "port" not in used:
            raise ValueError("port = 0 picks a free port, but the template never passes {port} "
                             "to the server: use {port} or set a fixed port")
        return self

    def resolve_paths(self, base: Path) -> None:
        """Make kv_dir and kv_root absolute (relative to the site file's folder) and real.

        Real: a `..` or a symbolic link in the path is resolved once, here, so that every later
        check (two arms sharing a directory, the KV on the target's filesystem, the device whose
        reads are watched) judges the directory the engine will really write to.
        """
        for key in ("kv_dir", "kv_root"):
            path = getattr(self, key)
            if path is not None:
                path = path.expanduser()
                setattr(self, key, real_path(path if path.is_absolute() else base / path))


def real_path(path: Path) -> Path:
    """Where a path really leads: `..` and links resolved, missing parts kept as written."""
    return Path(os.path.realpath(path))


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
            real = real_path(arm.kv_dir)  # "x/../kv-baseline" is kv-baseline, whatever x is
            if real in seen:
                same = "" if real == arm.kv_dir else f" (written {arm.kv_dir})"
                problems.append(f"arms {seen[real]} and {name} share kv_dir {real}{same}: "
                                "each arm needs its own KV directory")
            seen.setdefault(real, name)
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
