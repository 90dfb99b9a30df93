"""site.toml [sweep]: the KV working-set sizes `kvgate sweep` measures, and how much at each."""

from __future__ import annotations

from pydantic import Field, PositiveInt, field_validator

from .strict import Strict
from .units import MAX_SIZE, Size

MAX_SIZES = 20  # a sweep of more sizes is a day of pairs; split it into two sweeps
MAX_PAIRS = 20


class SweepSettings(Strict):
    """Which working sets to measure: each size a few ABBA pairs of G3's cold-recovery probe."""

    # The KV working set of each point (contexts x context_tokens x KV bytes per token), in
    # ascending order; [] = the default series: 1, 2, 4, 8 and 16 times the smallest working
    # set the concurrency allows (gates.model.sweep_sizes).
    sizes: list[Size] = Field(default=[], max_length=MAX_SIZES, description=(
        f"at most {MAX_SIZES} sizes"))
    pairs: PositiveInt = Field(default=3, ge=2, le=MAX_PAIRS, description=(
        "a pair's ratio needs a second pair to have an interval; more than 20 per size is a "
        "gate's job (kvgate run g3)"))
    concurrency: PositiveInt = 8  # probe requests in flight at every size
    # The engine's own GPU KV cache, as its configuration sets it, drawn on the chart (kvgate
    # cannot read it from every engine); None: not drawn.
    gpu_cache: Size | None = Field(default=None, gt=0)

    @field_validator("sizes")
    @classmethod
    def _ascending(cls, sizes: list[int]) -> list[int]:
        for before, after in zip(sizes, sizes[1:], strict=False):
            if after <= before:
                raise ValueError(f"sizes must grow: {after:,} B after {before:,} B")
        if any(not 0 < s <= MAX_SIZE for s in sizes):
            raise ValueError("each size is a working set of at least one byte")
        return sizes
