"""Which engine G2/G3 run: the installed llama.cpp server ([engine] prefer), else the [arms].

With llama.cpp the arms are generated: the candidate keeps its KV as slot files in a directory
inside the target (the storage under test); the baseline and the recompute arm have no KV tier,
so after eviction they recompute every context, which is what an engine without the candidate
tier does today. The site's [engine.workload] keys replace [workload] keys for the real engine
(a CPU prefills ~1,000 tokens/s, not the simulator's rate).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..core import Arm, EngineChoice
from .llamacpp import LlamaCppInstall, find_install

INSTALL_HINT = "kvgate engine install llamacpp"
CANDIDATE_DIR = "kv-llamacpp-candidate"


class EngineRun(BaseModel):
    """The arms and workload G2/G3 use, and what to say about them in the report."""

    arms: dict[str, Arm]
    workload: dict[str, Any]  # [workload] keys to replace, {} = as written
    engine: str  # the report's one-line answer to "which engine?"
    real: bool
    kv_bytes_per_token: int | None = None
    install: LlamaCppInstall | None = None


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
    common = dict(kind="launch", engine="llamacpp", model="tiny-llama",
                  startup_timeout=choice.startup_timeout, stop_timeout=10.0)
    return {"baseline": Arm(**common, command=server_command(install, choice, tier=False)),
            "candidate": Arm(**common, command=server_command(install, choice, tier=True),
                             kv_dir=target / CANDIDATE_DIR),
            "recompute": Arm(**common, command=server_command(install, choice, tier=False))}


def choose_engine(choice: EngineChoice, arms: dict[str, Arm], target: Path,
                  root: Path | None = None) -> EngineRun:
    """The real engine when preferred and installed, else the site's own arms, saying which."""
    if choice.prefer != "llamacpp":
        return EngineRun(arms=arms, workload={}, engine=_describe(arms), real=False)
    install = find_install(choice.version, root)
    if install is None:
        return EngineRun(arms=arms, workload={}, real=False, engine=(
            f"{_describe(arms)}: llama.cpp {choice.version} is not installed "
            f"(run `{INSTALL_HINT}` to measure a real engine)"))
    return EngineRun(arms=llamacpp_arms(install, choice, target), workload=choice.workload,
                     engine=f"{install.describe()}, tiny random-weight model (CPU); "
                     f"candidate KV restored from slot files in {target / CANDIDATE_DIR}",
                     real=True, kv_bytes_per_token=install.shape.kv_bytes_per_token,
                     install=install)


def _describe(arms: dict[str, Arm]) -> str:
    engines = sorted({a.engine for a in arms.values()})
    if engines == ["kvgate-sim"]:
        return "kvgate simulator (simulated engine, not valid for procurement)"
    return "the site's [arms]: " + ", ".join(engines)
