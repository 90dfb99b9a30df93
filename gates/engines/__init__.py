"""Real engines for G2/G3 (llama.cpp, vLLM): the choice of engine and the arm protocol."""

from .armstorage import arm_storage
from .choice import EngineRun, run_engine
from .fairness import GainBound, gain_bound, unexplained_gains
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
    "GainBound",
    "ProtocolError",
    "abba_pair",
    "arm_problem",
    "arm_storage",
    "engine_site",
    "gain_bound",
    "kv_bytes_per_token",
    "machine_readings",
    "proof_context",
    "run_engine",
    "unexplained_gains",
]
