"""site.toml [sweep]: the KV working-set sizes `kvgate sweep` measures, and how much at each."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, field_validator

from ..quantities import MAX_SIZE, Size
from .strict import Strict

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
    # How the GPU cache is emptied before each probe: "none" lets the working set itself evict
    # it, as in service, so a size the GPU cache holds is served from it (the proof's eviction
    # control reads the GPU-hit counters and says so); "reset" empties it (POST
    # /reset_prefix_cache) as G3 does, so every size restores.
    eviction: Literal["none", "reset"] = "none"
    # The engine's GPU KV cache and CPU (DRAM) tier while the sweep runs, on the baseline and
    # candidate arms alike, replacing the site's [arms] gpu_cache and cpu_tier: drawn on the
    # chart, held by the proof (a CPU tier that holds a working set makes its proof
    # INCONCLUSIVE), and given to a launched engine whose command takes {gpu_cache} /
    # {cpu_tier}. None: the arms' own. An installed engine's arms (llama.cpp, vLLM) are
    # kvgate's and keep theirs; the sweep says so.
    gpu_cache: Size | None = Field(default=None, gt=0)
    cpu_tier: Size | None = None

    @field_validator("sizes")
    @classmethod
    def _ascending(cls, sizes: list[int]) -> list[int]:
        for before, after in zip(sizes, sizes[1:], strict=False):
            if after <= before:
                raise ValueError(f"sizes must grow: {after:,} B after {before:,} B")
        if any(not 0 < s <= MAX_SIZE for s in sizes):
            raise ValueError("each size is a working set of at least one byte")
        return sizes
