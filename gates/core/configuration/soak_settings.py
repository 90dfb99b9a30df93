"""site.toml [soak]: how G4 loads the candidate, and the plan that overrides thresholds' [g4]."""

from __future__ import annotations

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator

from ..quantities import MAX_SIZE, Duration, Rate, Size
from .strict import Strict

# G4's fio write-then-verify pass writes blocks of this size (gates.soak.fio_verify's default),
# and fio refuses a file smaller than its block.
VERIFY_BLOCK = 128 * 1024


class SoakSettings(Strict):
    """How G4 loads the candidate: multi-turn sessions, so the tier is written and read."""

    # None = thresholds.toml g4.duration (72 h). Not 0: the soak would fall through to 72 h.
    duration: Duration | None = Field(default=None, gt=0, description=(
        "leave the key out for thresholds.toml's [g4] duration"))
    window: Duration | None = Field(default=None, gt=0, description=(
        "leave the key out for thresholds.toml's [g4] window"))
    warmup_windows: NonNegativeInt | None = None  # None = thresholds.toml g4.warmup_windows
    sessions: PositiveInt = 8
    turns: PositiveInt = 4
    first_tokens: PositiveInt = 2048
    turn_tokens: PositiveInt = 128
    output_tokens: PositiveInt = 32
    verify_size: Size = Field(default=64 * 1024**2, ge=VERIFY_BLOCK, description=(
        "G4's fio verify pass writes 128 KiB blocks, and fio refuses a smaller file"))
    # Low intensity: the soak's load, not fio, is under test.
    verify_rate: Rate = Field(default=32e6, le=MAX_SIZE, description=(
        "fio's rate= takes whole bytes per second, up to 2^63 - 1"))

    @field_validator("verify_rate")
    @classmethod
    def _limits_fio(cls, rate: float) -> float:
        # gates.soak passes fio rate=int(verify_rate): below 1 B/s that is 0, which fio reads
        # as no limit at all, and the verify pass would compete with the soak's load.
        if rate < 1:
            raise ValueError("must be at least 1 B/s: fio's rate= is whole bytes per second and "
                             'reads 0 as unlimited (write the rate, e.g. "32 MB/s")')
        return rate
