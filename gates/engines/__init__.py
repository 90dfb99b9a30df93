"""Real engines for G2/G3 (llama.cpp, vLLM): the choice of engine and the arm protocol."""

from .choice import (
    CANDIDATE_DIR,
    EngineRun,
    choose_engine,
    engine_problems,
    server_command,
)
from .installs import (
    InstallError,
    cache_root,
    run_step,
)
from .protocol import (
    ProtocolError,
    kv_devices,
    run_arm_once,
    start_arm,
)
from .runner import ArmRunner, arm_problem, engine_site, kv_bytes_per_token

__all__ = [
    "ArmRunner",
    "CANDIDATE_DIR",
    "EngineRun",
    "InstallError",
    "ProtocolError",
    "arm_problem",
    "cache_root",
    "choose_engine",
    "engine_problems",
    "engine_site",
    "kv_bytes_per_token",
    "kv_devices",
    "run_arm_once",
    "run_step",
    "server_command",
    "start_arm",
]
