"""A working-set sweep's sizes as workloads, the memory tiers drawn beside them, and what the
KV bandwidth model forecasts at each size. Pure.

A point's working set is the KV of its contexts: contexts x context_tokens x KV bytes per
token. The context stays the workload's; the sweep sets how many there are. A point has at
least one more context than requests in flight, and an odd number, so that the TTFT p50 is one
probe inside a wave, as `kvgate config check` asks of G2's workload.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

from ..core.quantities import format_size
from .bandwidth import fmt_rate, predict

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
    kind: str = ""  # "gpu", "cpu" or "host" (the page cache, dropped before every probe)


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
    found = [Tier(name="GPU KV cache", bytes=gpu_cache, kind="gpu",
                  source="the candidate arm's gpu_cache ([sweep] gpu_cache where set)")
             if gpu_cache else None,
             Tier(name="CPU tier", bytes=cpu_tier, kind="cpu",
                  source="the candidate arm's cpu_tier ([sweep] cpu_tier where set)")
             if cpu_tier else None,
             Tier(name="host memory (page cache)", bytes=memory_bytes, source="psutil",
                  kind="host")
             if memory_bytes else None]
    return sorted((t for t in found if t is not None), key=lambda t: t.bytes)


class ForecastPoint(BaseModel):
    """What the bandwidth model says one working set should show."""

    working_set: int  # bytes
    served_by: str  # the memory tier that holds it on both arms, or "storage"
    ttft_reduction: float  # %
    throughput_gain: float  # %: an upper bound (the model counts no decode time)


class SweepForecast(BaseModel):
    """The KV model's line beside the sweep's measured one, and what it stands on."""

    baseline_bps: float  # the baseline arm's KV read bandwidth
    baseline_source: str
    candidate_bps: float  # the candidate's: G1's KV-restore bandwidth
    candidate_source: str
    memories: list[Tier]  # the tiers that serve both arms' probes where they hold the set
    points: list[ForecastPoint]
    assumptions: list[str]


def sweep_forecast(sizes: Sequence[int], memories: Sequence[Tier], baseline: tuple[float, str],
                   candidate: tuple[float, str]) -> SweepForecast:
    """The bandwidth model at each working set: no gain where a memory tier that serves the
    probes on both arms (``memories``) holds it; else the ideal restore-time ratio
    (gates.model.predict) of the two bandwidths, (bytes/s, where it was read) each."""
    points = []
    for size in sizes:
        held = next((t for t in sorted(memories, key=lambda t: t.bytes) if t.bytes >= size),
                    None)
        if held is not None:
            points.append(ForecastPoint(working_set=size, served_by=held.name,
                                        ttft_reduction=0.0, throughput_gain=0.0))
            continue
        p = predict(size, candidate[0], baseline_bps=baseline[0])
        points.append(ForecastPoint(working_set=size, served_by="storage",
                                    ttft_reduction=100 * (p.ttft_reduction or 0.0),
                                    throughput_gain=100 * (p.throughput_gain or 0.0)))
    said = [f"{t.name} ({format_size(t.bytes)}) serves both arms' probes where it holds the "
            "working set: no gain there" for t in memories]
    return SweepForecast(
        baseline_bps=baseline[0], baseline_source=baseline[1], candidate_bps=candidate[0],
        candidate_source=candidate[1], memories=list(memories), points=points, assumptions=[
            f"baseline {fmt_rate(baseline[0])} ({baseline[1]}), candidate "
            f"{fmt_rate(candidate[0])} ({candidate[1]})", *said,
            "beyond them every probe restores its whole context at the arm's bandwidth, "
            "nothing else in TTFT (ideal: the reduction is an upper bound), no decode time "
            "(the throughput gain is an upper bound)"])
