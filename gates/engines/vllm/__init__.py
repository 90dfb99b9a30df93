"""vLLM: its CPU build installed in a venv, a tiny local model, the ExampleConnector arms."""

from .arms import (
    CANDIDATE_DIR,
    CONNECTOR,
    aligned,
    connector_fit,
    server_command,
    site_connector_problems,
    vllm_arms,
    workload_fit,
)
from .installer import (
    BROKEN_EXTRAS,
    DISTRIBUTION,
    MANIFEST,
    SERVED_NAME,
    VllmInstall,
    VllmShape,
    find_vllm,
    install,
    install_dir,
    preflight,
    recipe,
)

__all__ = [
    "BROKEN_EXTRAS",
    "CANDIDATE_DIR",
    "CONNECTOR",
    "DISTRIBUTION",
    "MANIFEST",
    "SERVED_NAME",
    "VllmInstall",
    "VllmShape",
    "aligned",
    "connector_fit",
    "find_vllm",
    "install",
    "install_dir",
    "preflight",
    "recipe",
    "server_command",
    "site_connector_problems",
    "vllm_arms",
    "workload_fit",
]
