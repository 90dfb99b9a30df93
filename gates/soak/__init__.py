"""G4 soak: the window rules, the runner, its set-up from G3, health collectors, metrics."""

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
from .load import (
    EndpointLoad,
)
from .load_rules import (
    drift_spans,
    duration,
    request_errors,
    soak_measurements,
    stability,
    throughput_floor,
    total_gap,
    ttft_drift,
)
from .metrics import (
    SoakExporter,
    render,
)
from .nvme_health import (
    NvmePaths,
    Smart,
)
from .rules import (
    KERNEL,
    PATHS,
    SIGNOFF_SECONDS,
    SMART,
    VERIFY,
    HealthReading,
    SoakPlan,
    WindowRecord,
    gap,
    kernel_errors,
    media_errors,
    paths_live,
    verify_errors,
)
from .runner import (
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

__all__ = [
    "EndpointLoad",
    "FakeClock",
    "FioVerify",
    "FreeSpace",
    "HealthReading",
    "KERNEL",
    "KernelLog",
    "NvmePaths",
    "PATHS",
    "ProcessHealth",
    "SIGNOFF_SECONDS",
    "SMART",
    "SetupError",
    "Smart",
    "SoakExporter",
    "SoakPlan",
    "SoakRunner",
    "SoakStatus",
    "SoakStore",
    "VERIFY",
    "WindowContext",
    "WindowRecord",
    "collectors",
    "drift_spans",
    "duration",
    "gap",
    "kernel_errors",
    "media_errors",
    "operating_point",
    "parse_verify_failures",
    "paths_live",
    "render",
    "request_errors",
    "scan_kernel_log",
    "soak_load",
    "soak_measurements",
    "soak_plan",
    "stability",
    "status",
    "throughput_floor",
    "total_gap",
    "ttft_drift",
    "verify_errors",
    "verify_job",
]
