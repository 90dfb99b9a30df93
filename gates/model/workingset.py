"""A working-set sweep's sizes as workloads, and the memory tiers drawn beside them. Pure.

A point's working set is the KV of its contexts: contexts x context_tokens x KV bytes per
token. The context stays the workload's; the sweep sets how many there are. A point has at
least one more context than requests in flight, and an odd number, so that the TTFT p50 is one
probe inside a wave, as `kvgate config check` asks of G2's workload.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

from ..core import format_size

DEFAULT_STEPS = (1, 2, 4, 8, 16)  # the default series: multiples of the smallest working set


class SweepSize(BaseModel):
    """One point's working set: as asked, and as the whole contexts that hold it."""

    asked: int  # bytes as [sweep] sizes wrote them; 0 in the default series
    contexts: int
    working_set: int  # bytes


class Tier(BaseModel):
    """A memory the KV could be served from instead of the storage, with its size."""

    name: str
    bytes: int
    source: str  # where kvgate read the size


def fewest_contexts(concurrency: int) -> int:
    """The smallest odd number of contexts above the requests in flight."""
    n = concurrency + 1
    return n if n % 2 else n + 1


def _odd(n: int) -> int:
    return n if n % 2 else n + 1


def sweep_sizes(sizes: Sequence[int], concurrency: int, context_bytes: int) -> list[SweepSize]:
    """Each asked size as whole contexts; [] gives the default series.

    ValueError naming the size when one is below the smallest working set the concurrency
    allows, or when two sizes come to the same contexts.
    """
    if context_bytes <= 0:
        raise ValueError("a context holds no KV bytes: check context_tokens and the KV bytes "
                         "per token")
    least = fewest_contexts(concurrency)
    if not sizes:
        return [SweepSize(asked=0, contexts=_odd(least * k), working_set=_odd(least * k)
                          * context_bytes) for k in DEFAULT_STEPS]
    out: list[SweepSize] = []
    for i, asked in enumerate(sizes):
        contexts = _odd(math.ceil(asked / context_bytes))
        if contexts < least:
            raise ValueError(
                f"sweep.sizes[{i}] = {format_size(asked)} is below the smallest working set at "
                f"concurrency {concurrency}: {least} contexts of {format_size(context_bytes)} = "
                f"{format_size(least * context_bytes)} (lower [sweep] concurrency or the "
                "workload's context_tokens, or start the sizes there)")
        if out and out[-1].contexts == contexts:
            raise ValueError(
                f"sweep.sizes[{i - 1}] and [{i}] ({format_size(sizes[i - 1])}, "
                f"{format_size(asked)}) both come to {contexts} contexts of "
                f"{format_size(context_bytes)}: space the sizes further apart")
        out.append(SweepSize(asked=asked, contexts=contexts,
                             working_set=contexts * context_bytes))
    return out


def space_needed(sizes: Sequence[SweepSize]) -> int:
    """Bytes the target must hold at once: the largest point's KV in both arms' directories."""
    return 2 * max((s.working_set for s in sizes), default=0)


def tiers(memory_bytes: int | None, cpu_tier: int | None,
          gpu_cache: int | None = None) -> list[Tier]:
    """The memories known to kvgate that a working set could hide in, smallest first."""
    found = [Tier(name="GPU KV cache", bytes=gpu_cache,
                  source="the candidate arm's gpu_cache ([sweep] gpu_cache where set)")
             if gpu_cache else None,
             Tier(name="CPU tier", bytes=cpu_tier,
                  source="the candidate arm's cpu_tier ([sweep] cpu_tier where set)")
             if cpu_tier else None,
             Tier(name="host memory (page cache)", bytes=memory_bytes, source="psutil")
             if memory_bytes else None]
    return sorted((t for t in found if t is not None), key=lambda t: t.bytes)
