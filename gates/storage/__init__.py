"""Storage instruments and G1: fio (jobs, runner, parser), target safety and lock, block
devices, RAID, XFS, NVMe, NICs, the inventory, and the G1 rules and configuration checks."""

from . import fioerrors, fiohosts, g1, g1config, g1hosts, g1shared
from .blockdev import ParseError, as_int, json_document
from .collector import Collector, Found, install_hint
from .devref import DeviceReader
from .fio import FioParseError, parse_fio_json
from .fiorun import fio_version, run_step
from .g1 import StepOutcome
from .g1charts import g1_charts
from .inventory import Inventory, collect
from .jobs import bytes_needed, files_written, g1_steps, job_value
from .lock import TargetBusy, TargetLock, lock_target
from .nvme import parse_list_subsys, parse_smart_log
from .progress import look_progress, step_progress
from .runner import CommandRunner, SubprocessRunner, ToolMissing
from .target import TargetError, check_directory, foreign_filesystem, resolve_target, watched_device

__all__ = [
    "Collector",
    "CommandRunner",
    "DeviceReader",
    "FioParseError",
    "Found",
    "Inventory",
    "ParseError",
    "StepOutcome",
    "SubprocessRunner",
    "TargetBusy",
    "TargetError",
    "TargetLock",
    "ToolMissing",
    "as_int",
    "bytes_needed",
    "check_directory",
    "collect",
    "files_written",
    "fio_version",
    "fioerrors",
    "fiohosts",
    "foreign_filesystem",
    "g1",
    "g1_charts",
    "g1_steps",
    "g1config",
    "g1hosts",
    "g1shared",
    "install_hint",
    "job_value",
    "json_document",
    "lock_target",
    "look_progress",
    "parse_fio_json",
    "parse_list_subsys",
    "parse_smart_log",
    "resolve_target",
    "run_step",
    "step_progress",
    "watched_device",
]
