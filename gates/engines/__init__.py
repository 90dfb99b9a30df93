"""Real engines for G2/G3 (llama.cpp, vLLM): the choice of engine and the arm protocol."""

from .choice import EngineRun, choose_engine
from .proofctx import proof_context
from .protocol import ProtocolError
from .runner import (
    ArmRunner,
    abba_pair,
    arm_problem,
    engine_site,
    kv_bytes_per_token,
    machine_readings,
)

__all__ = [
    "ArmRunner",
    "EngineRun",
    "ProtocolError",
    "abba_pair",
    "arm_problem",
    "choose_engine",
    "engine_site",
    "kv_bytes_per_token",
    "machine_readings",
    "proof_context",
]
