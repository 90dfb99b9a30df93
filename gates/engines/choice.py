"""Which engine G2/G3 run: the installed engine [engine] prefer names, else the site's [arms].

With a real local engine the arms are generated: the candidate keeps its KV in files in a
directory inside the target (the storage under test: llama.cpp's slot files, vLLM's
ExampleConnector files); the baseline and the recompute arm have no KV tier, so after eviction
they recompute every context, which is what an engine without the candidate tier does today.
The engine's workload keys ([engine] workload, [engine.vllm] workload) replace [workload] keys
(a CPU prefills ~1,000 tokens/s, not the simulator's rate).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..core.configuration import Arm, ConfigError, EngineChoice, Site
from ..options import RunConfig
from .llamacpp import LlamaCppInstall, find_install
from .vllm import CANDIDATE_DIR as VLLM_DIR
from .vllm import VllmInstall, find_vllm, site_connector_problems, vllm_arms, workload_fit

INSTALL_HINT = "kvgate engine install llamacpp"
CANDIDATE_DIR = "kv-llamacpp-candidate"


class EngineRun(BaseModel):
    """The arms and workload G2/G3 use, and what to say about them in the report."""

    arms: dict[str, Arm]
    workload: dict[str, Any]  # [workload] keys to replace, {} = as written
    engine: str  # the report's one-line answer to "which engine?"
    real: bool
    kv_bytes_per_token: int | None = None
    install: LlamaCppInstall | VllmInstall | None = None
    tool: str = ""  # the tool-versions key the install is named under
    missing: str = ""  # the preferred engine that is not installed, and how to install it
    why: str = ""  # what chose it: "--engine llamacpp", or the site file's [engine] prefer

    def headline(self) -> str:
        """The run's first line: which engine G2/G3 measure, why, and the word for another."""
        other = "" if self.real else (
            "; a real engine: --engine llamacpp or --engine vllm (make demo ENGINE=llamacpp)")
        return f"G2/G3 measure: {self.engine} (chosen by {self.why}){other}"


def server_command(install: LlamaCppInstall, choice: EngineChoice, tier: bool) -> list[str]:
    """llama-server's argv template: loopback, metrics, no RAM prompt cache, slot files."""
    argv = [str(install.server), "--model", str(install.model), "--host", "127.0.0.1",
            "--port", "{port}", "--parallel", str(choice.slots),
            "--ctx-size", str(choice.slots * choice.slot_tokens), "--metrics",
            # The RAM prompt cache would answer a probe from memory: the tier must do it.
            "--cache-ram", "0", "--no-webui"]
    if choice.threads:
        argv += ["--threads", str(choice.threads)]
    return argv + (["--slot-save-path", "{kv_dir}"] if tier else [])


def llamacpp_arms(install: LlamaCppInstall, choice: EngineChoice,
                  target: Path) -> dict[str, Arm]:
    """Baseline and recompute without a tier, the candidate with slot files on the target."""
    # Its KV cache in memory (--ctx-size tokens over the slots): the CPU build's "GPU" cache.
    common = dict(kind="launch", engine="llamacpp", model="tiny-llama",
                  startup_timeout=choice.startup_timeout, stop_timeout=10.0,
                  gpu_cache=choice.slots * choice.slot_tokens * install.shape.kv_bytes_per_token)
    return {"baseline": Arm(**common, command=server_command(install, choice, tier=False)),
            "candidate": Arm(**common, command=server_command(install, choice, tier=True),
                             kv_dir=target / CANDIDATE_DIR),
            "recompute": Arm(**common, command=server_command(install, choice, tier=False))}


def choose_engine(choice: EngineChoice, arms: dict[str, Arm], target: Path,
                  root: Path | None = None) -> EngineRun:
    """The real engine when preferred and installed, else the site's own arms, saying which."""
    if choice.prefer == "vllm":
        return _vllm_run(choice, arms, target, root)
    if choice.prefer != "llamacpp":
        return EngineRun(arms=arms, workload={}, engine=_describe(arms), real=False)
    install = find_install(choice.version, root)
    if install is None:
        return _missing(arms, f"llama.cpp {choice.version} is not installed (run "
                        f"`{INSTALL_HINT}` to measure a real engine)")
    return EngineRun(arms=llamacpp_arms(install, choice, target), workload=choice.workload,
                     engine=f"{install.describe()}, tiny random-weight model (CPU); "
                     f"candidate KV restored from slot files in {target / CANDIDATE_DIR}",
                     real=True, kv_bytes_per_token=install.shape.kv_bytes_per_token,
                     install=install, tool="llama.cpp")


def _vllm_run(choice: EngineChoice, arms: dict[str, Arm], target: Path,
              root: Path | None) -> EngineRun:
    install = find_vllm(choice.vllm.version, root)
    if install is None:
        return _missing(arms, f"vLLM {choice.vllm.version} is not installed (run `kvgate engine "
                        "install vllm` to measure a real vLLM)")
    mode = "torch.compile" if choice.vllm.compile else "eager (--enforce-eager)"
    return EngineRun(
        arms=vllm_arms(install, choice.vllm, target), workload=choice.vllm.workload, real=True,
        engine=f"{install.describe()}, tiny random-weight Llama (CPU, {mode}); candidate KV "
        f"loaded by ExampleConnector from files in {target / VLLM_DIR}",
        kv_bytes_per_token=install.shape.kv_bytes_per_token, install=install, tool="vLLM")


def run_engine(config: RunConfig, root: Path | None = None) -> EngineRun:
    """The engine G2/G3 measure, chosen once per run: --engine when given (RunConfig wrote it
    into [engine] prefer), else the site's own choice. A real engine asked for by name that is
    not installed stops the run: falling back would measure something else than was asked."""
    site, asked = config.site, config.engine_asked
    run = choose_engine(site.engine, site.arms, site.target.directory, root)
    if asked and run.missing:
        raise ConfigError(f"--engine {asked}", [
            f"{run.missing}; or leave --engine out to measure the site's [arms]"])
    why = f"--engine {asked}" if asked else \
        f'{config.site_file.path} [engine] prefer = "{site.engine.prefer}"'
    return run.model_copy(update={"why": why})


def engine_problems(site: Site, run: EngineRun) -> list[str]:
    """Why the chosen engine cannot run the site's workload as G2/G3 will ([] = it can)."""
    workload = site.engine_workload(run.workload)
    if not isinstance(run.install, VllmInstall):
        return site_connector_problems(run.arms, workload)
    return [f"[engine.vllm] workload: {p}" for p in workload_fit(
        workload, site.engine.vllm, run.install.shape, site.target.directory)]


def _missing(arms: dict[str, Arm], missing: str) -> EngineRun:
    return EngineRun(arms=arms, workload={}, real=False, missing=missing,
                     engine=f"{_describe(arms)}: {missing}")


def _describe(arms: dict[str, Arm]) -> str:
    engines = sorted({a.engine for a in arms.values()})
    if engines == ["kvgate-sim"]:
        return "kvgate simulator (simulated engine, not valid for procurement)"
    return "the site's [arms]: " + ", ".join(engines)
