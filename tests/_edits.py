"""Edits of a shipped file's text that fail loudly when they do not happen.

A test setup that edits thresholds.toml or a site text by str.replace silently tests the
shipped values when the text it looks for has changed; `edited` asserts each edit took.
"""

from __future__ import annotations

from pathlib import Path


def edited(text: str, old: str, new: str, *, where: str, count: int | None = 1) -> str:
    """text with old replaced by new; fails unless old occurs count times (None: at least once)."""
    found = text.count(old)
    assert found == count if count is not None else found >= 1, (
        f"{where}: {old!r} occurs {found} times, the test expects "
        f"{count if count is not None else 'at least 1'}: the edit would not happen as meant")
    return text.replace(old, new)


# A small run of G2 and G3 for tests of an engine's wiring: one level at concurrency 1 (G3's
# correctness check reuses the arms' own concurrency-1 probes), two repetitions, G3's pairs at
# confidence 0.7 (15 % per side). The rule's risk at the shipped plan is tests/test_paired.py's
# and bench/'s.
SMALL_RUN = (("concurrency = [8, 16]", "concurrency = [1]"),
             ("repetitions = 3", "repetitions = 2"),
             ("correctness_tokens = 16", "correctness_tokens = 8"),
             ("confidence = 0.95", "confidence = 0.7"))


def small_thresholds(repo: Path, pair_looks: list[int]) -> str:
    """The shipped thresholds.toml edited for a small run, G3 looking at pair_looks."""
    text = (repo / "thresholds.toml").read_text()
    for old, new in (*SMALL_RUN, ("pair_looks = [7, 14, 84]", f"pair_looks = {pair_looks}")):
        text = edited(text, old, new, where="thresholds.toml")
    return text
