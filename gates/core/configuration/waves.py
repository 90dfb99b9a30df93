"""Workloads whose TTFT p50 is a queue artefact: the median probe at a boundary between waves.

A repetition probes every context once in a closed loop of ``c`` requests, so its probes go out
in waves of c (dispatch order: probe i in wave i // c). The p50 of n probes is the mean of the
((n - 1) // 2)-th and (n // 2)-th values; when those two come from different waves, the p50
is the mean of one wave's last probe and the next wave's first, and which probe lands where
moves with queue order from one repetition to the next (16 contexts at concurrency 8: run-to-run
CV 5-20 % on a quiet machine with llama.cpp, against 0.8-1.6 % with 24). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence


def median_waves(contexts: int, concurrency: int) -> tuple[int, int]:
    """The waves (1-based) of the two probes whose mean is the TTFT p50."""
    lo, hi = (contexts - 1) // 2, contexts // 2
    return lo // concurrency + 1, hi // concurrency + 1


def at_boundary(contexts: int, concurrency: int) -> bool:
    """Whether the TTFT p50 is the mean of two probes from different waves."""
    first, second = median_waves(contexts, concurrency)
    return first != second


def inside_every_wave(levels: Sequence[int], start: int) -> int:
    """The smallest context count from ``start`` up whose p50 sits inside a wave at every level."""
    n = max(start, max(levels))
    while any(at_boundary(n, c) for c in levels):
        n += 1
    return n


def wave_warnings(contexts: int, levels: Sequence[int], where: str) -> list[str]:
    """A warning for each G2 level whose TTFT p50 falls at a boundary between waves."""
    out = []
    for c in levels:
        if c > contexts or not at_boundary(contexts, c):
            continue
        first, second = median_waves(contexts, c)
        out.append(f"{where} = {contexts} at concurrency {c}: the probes go out in waves of {c} "
                   f"and the TTFT p50 (the mean of probes {(contexts - 1) // 2 + 1} and "
                   f"{contexts // 2 + 1} of {contexts}) falls between wave {first} and wave "
                   f"{second}, so queue order, not the storage, moves it from one repetition "
                   f"to the next; {inside_every_wave(levels, contexts + 1)} contexts keep it "
                   f"inside a wave at every level {list(levels)}")
    return out
