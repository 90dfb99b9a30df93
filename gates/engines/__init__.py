"""Real engines kvgate drives for G2/G3: the choice of engine and the G2/G3 arm protocol."""

from .choice import (
    CANDIDATE_DIR,
    EngineRun,
    choose_engine,
    server_command,
)
from .protocol import (
    ProtocolError,
    run_arm_once,
)

__all__ = [
    "CANDIDATE_DIR",
    "EngineRun",
    "ProtocolError",
    "choose_engine",
    "run_arm_once",
    "server_command",
]
