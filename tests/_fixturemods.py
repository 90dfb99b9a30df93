"""A module of fixtures/ as the kvgate pytest plugin loads it (by file, under the plugin's
module name), or loaded here the same way: tests of a fixture's helpers import it so."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from conftest import REPO


def fixture_module(stem: str) -> ModuleType:
    """fixtures/<stem>.py, once per process (sys.modules["kvgate_fixtures_<stem>"])."""
    name = f"kvgate_fixtures_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "fixtures" / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
