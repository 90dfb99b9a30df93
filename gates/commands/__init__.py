"""The CLI verbs other than `run`: config check, model, loadgen, engine, bundle, compare,
inventory, proof, key, verify, waive."""

from .bundle import (
    add_bundle_commands,
    bundle_command,
)
from .compare import (
    add_compare_commands,
    compare_command,
)
from .configcheck import (
    config_check,
    say_embedded,
)
from .engine import (
    add_engine_commands,
    engine_command,
)
from .inference import (
    add_inference_commands,
    loadgen,
    sim_serve,
)
from .inventory import (
    inventory_command,
)
from .key import (
    add_key_commands,
    key_command,
)
from .model import (
    add_model_commands,
    model_command,
)
from .proof import (
    add_proof_commands,
    proof_command,
)
from .verify import (
    add_verify_commands,
    verify_command,
)
from .waive import (
    add_waive_commands,
    waive_command,
)

__all__ = [
    "add_bundle_commands",
    "add_compare_commands",
    "add_engine_commands",
    "add_inference_commands",
    "add_key_commands",
    "add_model_commands",
    "add_proof_commands",
    "add_verify_commands",
    "add_waive_commands",
    "bundle_command",
    "compare_command",
    "config_check",
    "engine_command",
    "inventory_command",
    "key_command",
    "loadgen",
    "model_command",
    "proof_command",
    "say_embedded",
    "sim_serve",
    "verify_command",
    "waive_command",
]
