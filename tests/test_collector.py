"""heap_set_aside: what lives during a phase is frozen out of the collector's walks, not kept."""

import asyncio
import gc

import pytest

from gates.loadgen.collector import FREEZE_EVERY, heap_set_aside


def test_objects_made_during_the_block_are_frozen_as_it_runs_and_released_after():
    async def main():
        async with heap_set_aside():
            start = gc.get_freeze_count()
            kept = [[i] for i in range(2000)]  # lists are tracked by the collector
            for _ in range(200):  # a re-freeze every FREEZE_EVERY; a busy machine may be late
                await asyncio.sleep(FREEZE_EVERY)
                if gc.get_freeze_count() >= start + len(kept):
                    break
            during = gc.get_freeze_count() - start
        return during, len(kept)

    assert gc.get_freeze_count() == 0
    during, made = asyncio.run(main())
    assert during >= made
    assert gc.get_freeze_count() == 0


def test_the_block_unfreezes_when_it_fails():
    async def main():
        async with heap_set_aside():
            raise RuntimeError("a phase that broke")

    with pytest.raises(RuntimeError):
        asyncio.run(main())
    assert gc.get_freeze_count() == 0
