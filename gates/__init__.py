"""kvgate: gate-based acceptance of storage as an LLM KV-cache offload tier.

The package root stays light: `import gates.sim` must load nothing else of kvgate, so the
public names below are loaded from gates.core on first use (PEP 562).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_FROM_CORE = {  # name -> the core room whose face has it
    "ConfigError": "gates.core.configuration",
    "GATES": "gates.core.verdicts",
    "GateRecord": "gates.core.verdicts",
    "Limit": "gates.core.verdicts",
    "Measurement": "gates.core.verdicts",
    "Outcome": "gates.core.verdicts",
    "UpstreamRef": "gates.core.verdicts",
    "gate_verdict": "gates.core.verdicts",
    "load_site": "gates.core.configuration",
    "load_thresholds": "gates.core.configuration",
}

__all__ = ["__version__", *_FROM_CORE]


def __getattr__(name: str) -> object:
    """The core's public names, imported when first asked for."""
    if name in _FROM_CORE:
        return getattr(importlib.import_module(_FROM_CORE[name]), name)
    raise AttributeError(f"module 'gates' has no attribute {name!r}")
