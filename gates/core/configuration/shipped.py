"""Files kvgate ships beside its code: the suites, fixtures, catalogue and default configuration.

In a checkout they are the repository's own folders; installed from a wheel they are package
data under gates/_shipped (pyproject's package-dir maps the folders there).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]
SHIPPED = ("suites", "fixtures", "catalog", "site.toml", "thresholds.toml", "checklist.toml")


def in_checkout() -> bool:
    """Whether kvgate runs from its source repository (an editable install or a clone)."""
    return (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "gates").is_dir()


def shipped(name: str) -> Path:
    """Where a shipped folder or file is: the repository's own, else the installed copy."""
    if name not in SHIPPED:
        raise ValueError(f"{name!r} is not shipped with kvgate (shipped: {', '.join(SHIPPED)})")
    if in_checkout():
        return CHECKOUT / name
    package = "gates._shipped" + ("" if "." in name else f".{name}")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"kvgate's {name} is missing from this installation")
    return Path(next(iter(spec.submodule_search_locations))) / ("" if "." not in name else name)
