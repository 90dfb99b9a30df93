"""Loading thresholds.toml and site.toml into validated models, with errors that name the key."""

from __future__ import annotations

import difflib
import hashlib
import json
import tomllib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, PlainSerializer, ValidationError
from pydantic.fields import FieldInfo

from ..quantities import WRITTEN
from .cross_checks import KeyedError
from .settings import Site
from .site_checks import both_files_problems, context_problem
from .thresholds import Thresholds, relaxations
from .waves import wave_warnings


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
    if raw.startswith(b"\xef\xbb\xbf"):  # tomllib reads it as "invalid statement" at 1:1
        raise ConfigError(path, ["the file starts with a UTF-8 byte-order mark (EF BB BF, "
                                 "which some Windows editors add): save it as UTF-8 without one"])
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


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds: itself, a list's or a table's items, an optional one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in typing.get_args(annotation) if (m := _inner_model(a))), None)


def _field_at(model: type[BaseModel], loc: tuple) -> FieldInfo | None:
    """The declaration of the key at loc; for a list item, the item's own (its bounds)."""
    field, owner = None, model
    for part in loc:
        if isinstance(part, int) and field is not None:
            item = next(iter(typing.get_args(field.annotation)), None)
            field = next((m for m in typing.get_args(item)[1:] if isinstance(m, FieldInfo)),
                         field)
        elif owner is not None and part in owner.model_fields:
            field = owner.model_fields[part]
            owner = _inner_model(field.annotation)
        # else: the name of an entry in a table of entries ([arms.NAME]); the field stays
    return field


# pydantic's number-bound errors, said as what to write.
_BOUNDS = {"greater_than": ("gt", "above"), "greater_than_equal": ("ge", "at least"),
           "less_than": ("lt", "below"), "less_than_equal": ("le", "at most")}


def _written_value(data: Any, loc: tuple) -> Any:
    """The value at loc as the file wrote it ("250 %"), not as validated (250.0)."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _out_of_range(error: dict, field: FieldInfo | None, written: Any) -> str:
    """'… is out of range: write a value at most 4088 (why)', the bound in the key's unit."""
    name, relation = _BOUNDS[error["type"]]
    bound = error["ctx"][name]
    # The key's own serializer, or its optional type's ("Duration | None"): the bound as written.
    metadata = [*field.metadata, *(m for a in typing.get_args(field.annotation)
                                   for m in getattr(a, "__metadata__", ()))] if field else []
    serializer = next((m for m in metadata if isinstance(m, PlainSerializer)), None)
    shown = f'"{serializer.func(bound)}"' if serializer else (
        f"{bound:f}".rstrip("0").rstrip(".") if isinstance(bound, float) else str(bound))
    why = f" ({field.description})" if field is not None and field.description else ""
    given = error.get("input") if written is None else written
    return f"{given!r} is out of range: write a value {relation} {shown}{why}"


def _describe(error: dict, model: type[BaseModel], prefix: str = "", data: Any = None) -> str:
    loc = tuple(error["loc"])
    key = prefix + _key(loc)
    if error["type"] in _BOUNDS:
        field, written = _field_at(model, loc), _written_value(data, loc)
        return f"key '{key}': {_out_of_range(error, field, written)}"
    if error["type"] == "extra_forbidden":
        owner = _model_at(model, loc)
        known = _file_keys(owner) if owner else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        hint = f" — did you mean '{close[0]}'?" if close else (
            f" (known keys: {', '.join(known)})" if known else "")
        return f"unknown key '{key}'{hint}"
    if error["type"] == "missing":
        return f"missing key '{key}'"
    if isinstance(keyed := error.get("ctx", {}).get("error"), KeyedError):
        # A table's check that refuses one of its keys: named as that key, then its value.
        loc = (*loc, *keyed.key.split("."))
        written = _written_value(data, loc)
        shown = keyed.value if written is None or isinstance(written, dict | list) else repr(
            written)
        return f"key '{prefix}{_key(loc)}': {shown} {keyed}"
    given = error.get("input")
    message = error["msg"].removeprefix("Value error, ")
    # A unit's own message starts with the value ("5 has no unit: …"); others get it added.
    shown = f" (got {given!r})" if not isinstance(given, dict | list) and not message.startswith(
        repr(given)) else ""
    return f"key '{key}': {message}{shown}"


def validate(model: type[BaseModel], data: dict, path: Path, prefix: str = "") -> Any:
    """Validate data read from the file at path: a ConfigError names its key, value and form.

    The data is what a person wrote, so a time or a percentage must carry its unit (WRITTEN).
    """
    problems = [f"unknown key '{prefix}{k}'" for k in LOADER_FIELDS.get(model, ()) if k in data]
    if problems:
        raise ConfigError(path, problems)
    try:
        return model.model_validate(data, context={WRITTEN: True})
    except ValidationError as exc:
        raise ConfigError(path, [_describe(e, model, prefix, data) for e in exc.errors()]) \
            from None


def _merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_thresholds(path: Path | str, profile: str = "",
                    named_in: Path | str | None = None) -> tuple[Thresholds, LoadedFile]:
    """Read thresholds.toml, apply the named limits profile, and validate every profile.

    named_in: the site file whose [site] limits_profile named the profile; an unknown one is
    then that file's error.
    """
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
    resolved = {}
    for name, override in overrides.items():
        # Every profile is checked, selected or not: a typo must not wait for the day it's used.
        resolved[name] = validate(Thresholds, _merge(data, override), path,
                                  prefix=f"profiles.{name}.")
        if problems := relaxations(base, resolved[name], name):
            raise ConfigError(path, problems)
    if profile:
        if profile not in profiles:
            raise _unknown_profile(path, profile, list(profiles), named_in)
        base = resolved[profile]
        base.profile = profile
        base.profile_description = str(profiles[profile].get("description", ""))
    return base, LoadedFile(path=str(path), sha256=sha)


def _unknown_profile(path: Path, profile: str, names: list[str],
                     named_in: Path | str | None) -> ConfigError:
    close = difflib.get_close_matches(profile, names, n=1)
    hint = f" — did you mean '{close[0]}'?" if close else ""
    known = f"it has {', '.join(names)}" if names else "it has none"
    if named_in is None:
        return ConfigError(path, [f"no limits profile '{profile}' under [profiles] ({known})"
                                  f"{hint}"])
    # The profile is named by the site file: its key is at fault, the thresholds file says why.
    write = " or ".join([f'"{close[0]}"'] if close else [f'"{n}"' for n in names][:3])
    return ConfigError(named_in, [
        f"key 'site.limits_profile': no limits profile '{profile}' under [profiles] in "
        f"{path} ({known}){hint + ' Write' if hint else ': write'} limits_profile = "
        f"{write + ', or ' if write else ''}\"\" for that file's own limits"])


def load_site(path: Path | str, base: Path | None = None) -> tuple[Site, LoadedFile]:
    """Read site.toml; relative directories are taken relative to base (default: its folder)."""
    path = Path(path)
    data, sha = read_document(path)
    site = validate(Site, data, path)
    site.resolve_paths((base or path.parent).resolve())
    return site, LoadedFile(path=str(path), sha256=sha)


def load_config(site_path: Path | str, thresholds_path: Path | str, base: Path | None = None
                ) -> tuple[Site, LoadedFile, Thresholds, LoadedFile]:
    """site.toml, then thresholds.toml with the site's limits profile, then what needs both."""
    site, site_file = load_site(site_path, base)
    thresholds, thresholds_file = load_thresholds(thresholds_path, site.site.limits_profile,
                                                  named_in=site_path)
    # The checks that need both files, or the site's paths resolved (gates.core.site_checks).
    for path, problems in both_files_problems(site, thresholds, site_path, thresholds_path):
        raise ConfigError(path, problems)
    return site, site_file, thresholds, thresholds_file


def workload_warnings(site: Site, thresholds: Thresholds) -> list[str]:
    """Workloads whose TTFT p50 falls between two waves at a G2 level, or a slot can't hold.

    The waves: gates.core.waves. A llama.cpp slot context shorter than a probe is a warning,
    not a refusal (gates.core.site_checks.context_problem says why).
    """
    runs = {"[workload] contexts": site.workload.contexts}
    if site.engine.prefer:
        runs[f'[engine] prefer = "{site.engine.prefer}": its workload\'s contexts'] = \
            site.engine_workload().contexts
    slot = [said for said in [context_problem(site)] if said and site.engine.prefer == "llamacpp"]
    return slot + [w for where, n in runs.items()
                   for w in wave_warnings(n, thresholds.g2.concurrency, where)]
