"""Shared helpers for the configuration-check tests: recorded tool outputs and fuzz strategies."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import strategies as st

TOOLS = Path(__file__).parent / "data" / "tools"


def tool_text(name: str) -> str:
    """A recorded (or documented-format) tool output from tests/data/tools."""
    return (TOOLS / name).read_text()


# Any JSON document: what a buggy or future tool version might print.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["Devices", "DevicePath", "Subsystems", "Paths", "Transport", "Name",
                         "filesystems", "blockdevices", "target", "name", "size", "rota",
                         "children", "critical_warning", "temperature", "percent_used",
                         "media_errors", "value", "ifname", "port", "sn", "mn", "wctemp",
                         "SectorSize", "options", "State"]) | st.text(max_size=6),
        inner, max_size=6),
    max_leaves=20)
json_texts = json_values.map(json.dumps) | st.text(max_size=200)
