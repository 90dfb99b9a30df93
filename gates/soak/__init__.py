"""G4 soak: the window rules, the runner, its set-up from G3, health collectors, metrics."""

from .cli import add_soak_commands, soak_command
from .metrics import SoakExporter
from .resume import carry_engine_logs, changed_files, log_summary, start_options
from .rules import SoakPlan
from .runner import SoakRunner
from .setup import (
    OperatingPoint,
    SetupError,
    collectors,
    operating_point,
    other_engine,
    soak_load,
    soak_plan,
)

__all__ = [
    "OperatingPoint",
    "SetupError",
    "SoakExporter",
    "SoakPlan",
    "SoakRunner",
    "add_soak_commands",
    "carry_engine_logs",
    "changed_files",
    "collectors",
    "log_summary",
    "operating_point",
    "other_engine",
    "soak_command",
    "soak_load",
    "soak_plan",
    "start_options",
]
