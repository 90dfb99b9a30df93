"""How a plan of looks spends its risk: the sign test's rank at each look, counted exactly. Pure.

At the true median each pair falls below it with probability 1/2, independently of the others,
whatever the (continuous) distribution of the pairs. A look at n pairs whose interval is
[d_(k), d_(n+1-k)] clears a ">=" limit set at that median only when at most k - 1 of its pairs
fall below it. Look after look, the count below is a binomial random walk, so the chance that
ANY look of the plan wrongly clears the limit is a count of its 2^n paths, made here with
integers, without rounding.

Look j of K takes the largest rank that keeps that chance at or under j / K of the plan's alpha:
the equal shares of a union bound (Bonferroni), but what an earlier look could not spend (the
sign test is discrete) passes on to the later ones, and the overlap of looks at the same pairs
is not paid twice. A path that a FAIL would have stopped is still counted as able to pass
later, so the figure is an upper bound on the rule's false accept, never an estimate of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache


def _extend(paths: dict[int, int], m: int) -> dict[int, int]:
    """Paths after m more pairs: count below -> number of sign sequences reaching it."""
    out: dict[int, int] = {}
    for below, count in paths.items():
        for i in range(m + 1):
            out[below + i] = out.get(below + i, 0) + count * math.comb(m, i)
    return out


def _walk(looks: tuple[int, ...], shares: list[Fraction]) -> tuple[tuple[int, ...], Fraction]:
    """Each look's largest rank that keeps the count of crossing paths within its share."""
    paths, done, spent, ranks = {0: 1}, 0, Fraction(0), []
    for n, share in zip(looks, shares, strict=True):
        paths, done = _extend(paths, n - done), n
        total = 2 ** n
        rank, crossing = 0, 0  # crossing: paths with at most rank - 1 below, out of total
        for below in range(n // 2):  # rank below + 1 stops the paths with at most below below
            more = crossing + paths.get(below, 0)
            if spent + Fraction(more, total) > share:
                break
            rank, crossing = below + 1, more
        spent += Fraction(crossing, total)
        paths = {b: c for b, c in paths.items() if b >= rank}
        ranks.append(rank)
    return tuple(ranks), spent


@lru_cache(maxsize=512)
def _spend(looks: tuple[int, ...], alpha: float) -> tuple[tuple[int, ...], Fraction]:
    return _walk(looks, [Fraction(alpha) * j / len(looks) for j in range(1, len(looks) + 1)])


@lru_cache(maxsize=512)
def _cut(looks: tuple[int, ...], alpha: float, made: int,
         pairs: int) -> tuple[tuple[int, ...], Fraction]:
    # The first `made` looks keep their planned shares, hence their ranks; the last look
    # made, at `pairs`, may spend all that is left of alpha, since no look follows it.
    shares = [Fraction(alpha) * j / len(looks) for j in range(1, made + 1)] + [Fraction(alpha)]
    return _walk(looks[:made] + (pairs,), shares)


def spending_ranks(looks: Sequence[int], alpha: float) -> tuple[int, ...]:
    """Each look's rank k (0: that look's interval is unbounded, it cannot decide)."""
    return _spend(tuple(looks), alpha)[0]


def spent_risk(looks: Sequence[int], alpha: float) -> float:
    """The chance that any look wrongly clears a limit at the true median (at most alpha)."""
    return float(_spend(tuple(looks), alpha)[1])


def cut_short(looks: Sequence[int], alpha: float, made: int, pairs: int) -> tuple[int, ...]:
    """The plan stopped early (its time budget spent) after its first ``made`` looks, at
    ``pairs`` pairs: those looks' ranks as planned, then the rank of a last look at ``pairs``
    that spends what is left of alpha. Counted the same way, the risk of the looks so made
    stays within alpha if where the plan stops does not depend on the pairs' signs; time
    depends on them only weakly (a slow repetition makes a longer pair)."""
    if not 0 < made < len(looks) or not looks[made - 1] < pairs < looks[made]:
        raise ValueError(f"a plan at {list(looks)} pairs cut short after {made} looks "
                         f"cannot make its last look at {pairs} pairs")
    return _cut(tuple(looks), alpha, made, pairs)[0]


def cut_short_risk(looks: Sequence[int], alpha: float, made: int, pairs: int) -> float:
    """The chance that any look of the plan so cut short wrongly clears a limit (<= alpha)."""
    cut_short(looks, alpha, made, pairs)  # the same refusals
    return float(_cut(tuple(looks), alpha, made, pairs)[1])
