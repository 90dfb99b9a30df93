"""kvgate: gate-based acceptance of storage as an LLM KV-cache offload tier.

The package root stays light: `import gates.sim` must load nothing else of kvgate, so the
public names below are loaded from gates.core on first use (PEP 562).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_FROM_CORE = ("ConfigError", "GATES", "GateRecord", "Limit", "Measurement", "Outcome",
              "UpstreamRef", "gate_verdict", "load_site", "load_thresholds")

__all__ = ["__version__", *_FROM_CORE]


def __getattr__(name: str) -> object:
    """The core's public names, imported when first asked for."""
    if name in _FROM_CORE:
        return getattr(importlib.import_module("gates.core"), name)
    raise AttributeError(f"module 'gates' has no attribute {name!r}")
