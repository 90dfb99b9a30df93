"""`kvgate sweep`: G3's paired probe at a series of KV working sets, committed size by size."""

from .cli import add_sweep_commands, sweep_command

__all__ = ["add_sweep_commands", "sweep_command"]
