"""The options every command shares: the run options (declared once for `kvgate run`,
`checklist`, `soak` and the pytest plugin) and the checks of what a user types (files read and
written, numbers in range). Imports only the core, so every room may use it."""

from .inputs import (
    LONGEST_S,
    Range,
    folder,
    input_file,
    output_dir,
    output_file,
    plain_text,
    run_id,
)
from .run import DEFAULTS, RunConfig, RunOptions, add_run_options

__all__ = [
    "DEFAULTS",
    "LONGEST_S",
    "Range",
    "RunConfig",
    "RunOptions",
    "add_run_options",
    "folder",
    "input_file",
    "output_dir",
    "output_file",
    "plain_text",
    "run_id",
]
