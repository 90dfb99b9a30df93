"""Write docs/reference/site-file.md and docs/reference/thresholds-file.md from the pydantic
models that read the two files (gates.core.configuration): every key, its unit, its default,
its range and the comment beside it in the model. One source of truth: the models.

    python docs/gen_reference.py          # rewrite the pages
    python docs/gen_reference.py --check  # exit 1 when a page is not what the models give

tests/test_docs.py runs the check, so a key added to a model and not to the pages fails.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gates.core.configuration import Arm, Site, Thresholds
from gates.core.quantities import Bytes, Duration, Percent, Rate, Size

DOCS = Path(__file__).resolve().parent
# A quantity is known by the function that parses it (its Annotated metadata).
QUANTITIES = {
    "size": (Size, 'a size with its unit: "2GiB", "256KiB" (0 alone may be bare)'),
    "bytes": (Bytes, "bytes: a whole number, or a size with its unit"),
    "time": (Duration, 'a time with its unit: "500us", "30s", "72h"'),
    "rate": (Rate, 'a bandwidth with its unit: "5 GB/s"; links in bits: "100 Gb/s"'),
    "percent": (Percent, 'a percentage with its sign: "25 %"'),
}
PARSERS = {meta.func: name for name, (kind, _) in QUANTITIES.items()
           for meta in typing.get_args(kind)[1:] if hasattr(meta, "func")}
SERIALIZERS = {name: next(m.func for m in typing.get_args(kind)[1:]
                          if type(m).__name__ == "PlainSerializer")
               for name, (kind, _) in QUANTITIES.items()}
LOADER_ONLY = {Thresholds: ("profile", "profile_description")}
BOUNDS = ((at.Gt, "> {}"), (at.Ge, "≥ {}"), (at.Lt, "< {}"), (at.Le, "≤ {}"),
          (at.MinLen, "length ≥ {}"), (at.MaxLen, "length ≤ {}"))


def quantity(info: FieldInfo) -> str:
    """The quantity a field holds ("time", "size", …) or "" for a plain value."""
    found = [PARSERS.get(getattr(m, "func", None)) for m in _metadata(info)]
    return next((f for f in found if f), "")


def _metadata(info: FieldInfo) -> list[Any]:
    items = list(info.metadata)
    for arg in typing.get_args(info.annotation):
        items += list(getattr(arg, "__metadata__", ()))
    return items


def kind_of(info: FieldInfo) -> str:
    """The unit or type column: the quantity, a choice, or the plain type."""
    return quantity(info) or _type_name(info.annotation)


NAMES = {str: "text", int: "whole number", float: "number", bool: "true or false",
         Path: "path", Any: "any value"}


def _type_name(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return "one of " + ", ".join(f'"{v}"' for v in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"table of {_type_name(args[1])}"
    return NAMES.get(tp, getattr(tp, "__name__", str(tp)))


def default_of(info: FieldInfo) -> str:
    """The default as the file would write it; "required" when there is none."""
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.default_factory() if info.default_factory else info.default
    if isinstance(value, BaseModel):
        return "(table below)"
    q = quantity(info)
    if q and value is not None and not isinstance(value, list):
        value = SERIALIZERS[q](value)
    return "unset" if value is None else f"`{_toml(value)}`"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def range_of(info: FieldInfo) -> str:
    """The bounds the model holds the value to, and their reason where it gives one."""
    found = [text.format(getattr(m, next(iter(m.__dataclass_fields__))))
             for m in _metadata(info) for kind, text in BOUNDS if isinstance(m, kind)]
    reasons = [m.description for m in _metadata(info) if getattr(m, "description", None)]
    return "; ".join(found + ([f"({r})" for r in reasons] if found else []))


def comments(model: type[BaseModel]) -> dict[str, str]:
    """Each field's comment in the model's source: the lines above it and the one beside it."""
    found, above = {}, []
    for line in inspect.getsource(model).splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# "))
            continue
        if match := re.match(r"    (\w+): .*?(?:#\s*(.*))?$", line):
            found[match.group(1)] = " ".join(above + [match.group(2) or ""]).strip()
        above = []
    return found


def nested(info: FieldInfo) -> type[BaseModel] | None:
    """The model a field holds (a table, or a table of named tables), if any."""
    for candidate in (info.annotation, *typing.get_args(info.annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def table(model: type[BaseModel], key: str) -> list[str]:
    """A heading and one row per key, then every nested table below it."""
    said, rows, below = comments(model), [], []
    doc = model.__dict__.get("__doc__") or ""  # its own, not Strict's
    for name, info in model.model_fields.items():
        if name in LOADER_ONLY.get(model, ()):
            continue
        inner = nested(info)
        if inner is not None and name != "arms":
            below.append((inner, f"{key}.{name}" if key else name))
            continue
        if name == "arms":
            below.append((Arm, "arms.NAME"))
            continue
        what = " ".join(filter(None, [said.get(name, ""), info.description or ""]))
        what = what.replace("|", "\\|")
        rows.append(f"| `{name}` | {kind_of(info)} | {default_of(info)} | "
                    f"{range_of(info) or ''} | {what} |")
    out = []
    if rows:
        out += [f"## `[{key}]`", ""] + ([" ".join(doc.split("\n\n")[0].split()), ""]
                                        if doc else []) + [
            "| key | unit or type | default | range | what it is |",
            "|---|---|---|---|---|", *rows, ""]
    for inner, inner_key in below:
        out += table(inner, inner_key)
    return out


def page(model: type[BaseModel], title: str, intro: str) -> str:
    """The whole reference page of one file."""
    units = ["| unit | how it is written |", "|---|---|",
             *[f"| {name} | {said} |" for name, (_, said) in QUANTITIES.items()]]
    return "\n".join([f"# {title}", "", "<!-- generated by docs/gen_reference.py from "
                      f"{model.__module__}.{model.__name__}: do not edit by hand -->", "",
                      intro, "", *units, "", *table(model, "")]).rstrip() + "\n"


PAGES = {
    "reference/site-file.md": (Site, "The site file (site.toml): every key", (
        "Every key of `site.toml` as kvgate's models read it: a key not listed here is "
        "refused with a \"did you mean\" hint. `kvgate config check` validates a file and "
        "prints the resolved values.")),
    "reference/thresholds-file.md": (Thresholds, "The limits file (thresholds.toml): every key", (
        "Every key of `thresholds.toml`. `[profiles.NAME]` tables (such as the shipped "
        "`demo`) hold the same keys and replace the file's own where the site names the "
        "profile in `[site] limits_profile`; a profile may not loosen a relative rule.")),
}


def main(argv: list[str]) -> int:
    """Write the pages, or with --check say which one is stale."""
    stale = []
    for name, (model, title, intro) in PAGES.items():
        path, text = DOCS / name, page(model, title, intro)
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
            continue
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    for name in stale:
        print(f"docs/{name} is not what the models give: run python docs/gen_reference.py",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
