"""G4 soak: the window rules, the runner, its set-up from G3, health collectors, metrics."""

from .cli import (
    add_soak_commands,
    soak_command,
)
from .clock import (
    FakeClock,
)
from .fio_verify import (
    FioVerify,
    parse_verify_failures,
    verify_job,
)
from .health import (
    FreeSpace,
    ProcessHealth,
    WindowContext,
)
from .kernel_log import (
    KernelLog,
    scan_kernel_log,
)
from .liveness import (
    Liveness,
    RunnerMark,
    judge,
    process_gone,
    this_runner,
)
from .load import (
    EndpointLoad,
)
from .load_rules import (
    duration,
    request_errors,
    soak_measurements,
    total_gap,
)
from .metrics import (
    SoakExporter,
    render,
)
from .nvme_health import (
    NvmePaths,
    Smart,
)
from .resume import (
    carry_engine_logs,
    changed_files,
    log_summary,
    start_options,
)
from .rules import (
    KERNEL,
    PATHS,
    SIGNOFF_SECONDS,
    SMART,
    VERIFY,
    HealthReading,
    SoakPlan,
    StartOptions,
    WindowRecord,
    gap,
    kernel_errors,
    media_errors,
    paths_live,
    verify_errors,
)
from .runner import (
    SoakBusy,
    SoakRunner,
    SoakStatus,
    status,
)
from .setup import (
    SetupError,
    collectors,
    operating_point,
    soak_load,
    soak_plan,
)
from .store import (
    SoakStore,
)
from .trends import (
    drift_spans,
    stability,
    throughput_floor,
    ttft_drift,
)

__all__ = [
    "EndpointLoad",
    "FakeClock",
    "FioVerify",
    "FreeSpace",
    "HealthReading",
    "KERNEL",
    "KernelLog",
    "Liveness",
    "NvmePaths",
    "PATHS",
    "ProcessHealth",
    "RunnerMark",
    "SIGNOFF_SECONDS",
    "SMART",
    "SetupError",
    "Smart",
    "SoakBusy",
    "SoakExporter",
    "SoakPlan",
    "SoakRunner",
    "SoakStatus",
    "SoakStore",
    "StartOptions",
    "VERIFY",
    "WindowContext",
    "WindowRecord",
    "add_soak_commands",
    "carry_engine_logs",
    "changed_files",
    "collectors",
    "drift_spans",
    "duration",
    "gap",
    "judge",
    "kernel_errors",
    "log_summary",
    "media_errors",
    "operating_point",
    "parse_verify_failures",
    "paths_live",
    "process_gone",
    "render",
    "request_errors",
    "scan_kernel_log",
    "soak_command",
    "soak_load",
    "soak_measurements",
    "soak_plan",
    "stability",
    "start_options",
    "status",
    "this_runner",
    "throughput_floor",
    "total_gap",
    "ttft_drift",
    "verify_errors",
    "verify_job",
]
