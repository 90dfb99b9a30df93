"""Real engines for G2/G3 (llama.cpp, vLLM): the choice of engine and the arm protocol."""

from .choice import (
    CANDIDATE_DIR,
    EngineRun,
    choose_engine,
    engine_problems,
    server_command,
)
from .protocol import (
    ProtocolError,
    run_arm_once,
    start_arm,
)

__all__ = [
    "CANDIDATE_DIR",
    "EngineRun",
    "ProtocolError",
    "choose_engine",
    "engine_problems",
    "run_arm_once",
    "server_command",
    "start_arm",
]
