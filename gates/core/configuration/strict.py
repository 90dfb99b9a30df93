"""The base of every configuration table: unknown keys are errors, assignments are checked, and
what a person wrote means what it says: no control character in a text (it would be printed
among kvgate's lines: gates.core.text), no TOML boolean where a number is meant (Python counts
`true` as 1: "repetitions = true" would read as one repetition), no inf or nan (TOML has
them: a limit of inf passes nothing, and nan compares false with everything)."""

from __future__ import annotations

import math
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from ..text import refusal


def _types(annotation: Any) -> set:
    """Every type an annotation names, inside unions, Annotated, lists and tuples."""
    args = typing.get_args(annotation)
    return {annotation} | {t for a in args for t in _types(a)}


def _booleans(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, list | tuple):
        return any(isinstance(v, bool) for v in value)
    return False


class Strict(BaseModel):
    """A TOML table: unknown keys are rejected, values are checked on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _as_written(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and (problem := refusal(value)):
            raise ValueError(problem)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value!r} is no limit (nothing passes inf, everything passes "
                             "-inf, nan compares false): write a finite number")
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _booleans(value) and not ({bool, Any} & _types(
                field.annotation)):
            raise ValueError(f"{value!r} is a boolean (true/false), where a number or a text is "
                             "meant: write the number (true is not read as 1)")
        return value
