"""vLLM: its CPU build installed in a venv, a tiny local model, the ExampleConnector arms."""

from .arms import CANDIDATE_DIR, site_connector_problems, vllm_arms, workload_fit
from .installer import VllmInstall, find_vllm, install

__all__ = [
    "CANDIDATE_DIR",
    "VllmInstall",
    "find_vllm",
    "install",
    "site_connector_problems",
    "vllm_arms",
    "workload_fit",
]
