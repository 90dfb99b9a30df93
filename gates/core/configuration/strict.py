"""The base of every configuration table: unknown keys are errors, assignments are checked."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A TOML table: unknown keys are rejected, values are checked on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
