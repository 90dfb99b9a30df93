"""The CLI verbs other than `run`: model, loadgen, engine, bundle, inventory."""

from .bundle import add_bundle_commands, bundle_command
from .engine import add_engine_commands, engine_command
from .inventory import inventory_command
from .inference import add_inference_commands, loadgen, sim_serve
from .model import add_model_commands, model_command

__all__ = [
    "add_bundle_commands",
    "add_engine_commands",
    "add_inference_commands",
    "add_model_commands",
    "bundle_command",
    "engine_command",
    "inventory_command",
    "loadgen",
    "model_command",
    "sim_serve",
]
