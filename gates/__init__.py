"""kvgate: gate-based acceptance of storage as an LLM KV-cache offload tier."""

__version__ = "0.1.0"

from ._config import ConfigError, load_site, load_thresholds  # noqa: E402
from ._record import GATES, GateRecord, UpstreamRef  # noqa: E402
from ._verdict import Limit, Measurement, Outcome, gate_verdict  # noqa: E402

__all__ = [
    "GATES", "ConfigError", "GateRecord", "Limit", "Measurement", "Outcome", "UpstreamRef",
    "__version__", "gate_verdict", "load_site", "load_thresholds",
]
