"""Reading the model's own input files (a catalogue TOML, a model's config.json). Pure but for
the one read: every failure is the caller's error type, naming the file and what is wrong."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Literal


def read_object(path: Path, error: type[ValueError], kind: Literal["TOML", "JSON"]) -> dict:
    """The object a TOML or JSON file holds; ``error`` naming the file otherwise."""
    as_json = kind == "JSON"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read it: {exc}") from None
    try:
        data = json.loads(text) if as_json else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise error(f"{path}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a {kind} object at the top level")
    return data
