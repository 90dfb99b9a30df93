"""Loading thresholds.toml and site.toml into validated models, with errors that name the key."""

from __future__ import annotations

import difflib
import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .settings import Site
from .thresholds import Thresholds


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and key."""

    def __init__(self, file: Path | str, problems: list[str]):
        self.file = str(file)
        self.problems = list(problems) or ["unusable configuration"]
        super().__init__(f"{file}:" + "\n  ".join(["", *self.problems])
                         if len(self.problems) > 1 else f"{file}: {self.problems[0]}")


class LoadedFile(BaseModel):
    """Where a configuration came from and its fingerprint."""

    path: str
    sha256: str


def read_document(path: Path) -> tuple[dict[str, Any], str]:
    """A TOML file (JSON when it ends in .json) as a dict, with its SHA-256."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(path, ["file not found"]) from None
    except OSError as exc:
        raise ConfigError(path, [f"cannot read: {exc.strerror}"]) from None
    as_json = path.suffix.lower() == ".json"
    try:
        data = json.loads(raw) if as_json else tomllib.loads(raw.decode())
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(path, [f"not valid {'JSON' if as_json else 'TOML'}: {exc}"]) from None
    if not isinstance(data, dict):
        raise ConfigError(path, ["the file must hold an object of keys, not a list or value"])
    return data, hashlib.sha256(raw).hexdigest()


# Fields of the models that the loader sets; a file that names them is wrong.
LOADER_FIELDS = {Thresholds: ("profile", "profile_description")}


def _file_keys(model: type[BaseModel]) -> list[str]:
    return [k for k in model.model_fields if k not in LOADER_FIELDS.get(model, ())]


def _key(loc: tuple) -> str:
    """A TOML-style key path: fio.qd_sweep[1] for a list item."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class that owns the key at loc[:-1], for "did you mean" hints."""
    for part in loc[:-1]:
        if not isinstance(part, str) or part not in model.model_fields:
            return None if isinstance(part, str) else model
        annotation = model.model_fields[part].annotation
        for candidate in (annotation, *getattr(annotation, "__args__", ())):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                model = candidate
                break
        else:
            return None
    return model


def _describe(error: dict, model: type[BaseModel], prefix: str = "") -> str:
    loc = tuple(error["loc"])
    key = prefix + _key(loc)
    if error["type"] == "extra_forbidden":
        owner = _model_at(model, loc)
        known = _file_keys(owner) if owner else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        hint = f" — did you mean '{close[0]}'?" if close else (
            f" (known keys: {', '.join(known)})" if known else "")
        return f"unknown key '{key}'{hint}"
    if error["type"] == "missing":
        return f"missing key '{key}'"
    given = error.get("input")
    shown = f" (got {given!r})" if not isinstance(given, dict | list) else ""
    message = error["msg"].removeprefix("Value error, ")
    return f"key '{key}': {message}{shown}"


def validate(model: type[BaseModel], data: dict, path: Path, prefix: str = "") -> Any:
    """Validate data against model, turning pydantic's errors into a ConfigError."""
    problems = [f"unknown key '{prefix}{k}'" for k in LOADER_FIELDS.get(model, ()) if k in data]
    if problems:
        raise ConfigError(path, problems)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(path, [_describe(e, model, prefix) for e in exc.errors()]) from None


def _merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_thresholds(path: Path | str, profile: str = "") -> tuple[Thresholds, LoadedFile]:
    """Read thresholds.toml, apply the named limits profile, and validate every profile."""
    path = Path(path)
    data, sha = read_document(path)
    profiles = data.pop("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(path, ["key 'profiles' must be a table of profiles"])
    base = validate(Thresholds, data, path)
    not_tables = [name for name, body in profiles.items() if not isinstance(body, dict)]
    if not_tables:
        raise ConfigError(path, [f"key 'profiles.{name}' must be a table, like "
                                 f"[profiles.{name}.g1]" for name in not_tables])
    overrides = {name: {k: v for k, v in body.items() if k != "description"}
                 for name, body in profiles.items()}
    for name, override in overrides.items():
        # Every profile is checked, selected or not: a typo must not wait for the day it's used.
        validate(Thresholds, _merge(data, override), path, prefix=f"profiles.{name}.")
    if profile:
        if profile not in profiles:
            close = difflib.get_close_matches(profile, list(profiles), n=1)
            hint = f" — did you mean '{close[0]}'?" if close else ""
            raise ConfigError(path, [f"no limits profile '{profile}' under [profiles]{hint}"])
        base = validate(Thresholds, _merge(data, overrides[profile]), path)
        base.profile = profile
        base.profile_description = str(profiles[profile].get("description", ""))
    return base, LoadedFile(path=str(path), sha256=sha)


def load_site(path: Path | str, base: Path | None = None) -> tuple[Site, LoadedFile]:
    """Read site.toml; relative directories are taken relative to base (default: its folder)."""
    path = Path(path)
    data, sha = read_document(path)
    site = validate(Site, data, path)
    site.resolve_paths((base or path.parent).resolve())
    return site, LoadedFile(path=str(path), sha256=sha)
