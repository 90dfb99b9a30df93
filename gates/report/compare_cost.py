"""A candidate's prices in a comparison: per TB, per point of TTFT p50 reduction, and what
holding the site's KV working set takes (arrays needed, their price). Pure.

compare.py prices each column with it from the catalogue; `kvgate verify` of a comparison
recomputes the same figures from the price, capacity and gains the comparison states.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

from ..model import PricePerPoint, price_per_point

TTFT_GAIN = "g3.ttft_p50_reduction"


class Prices(BaseModel):
    """What one array's catalogue price and capacity come to for the figures measured."""

    price_per_tb: float
    price_per_point: dict[int, PricePerPoint] = {}  # concurrency -> per point of TTFT p50
    arrays_needed: int | None = None  # to hold the working set; None: none was given
    price_for_capacity: float | None = None  # arrays_needed x price


def prices(price: float, capacity_tb: float, gains: Sequence, capacity_needed: int = 0) -> Prices:
    """The prices of one candidate (gains: its G3 Gain rows; capacity_needed in bytes, 0 none).

    Arrays bought for capacity add no speed to one context's restore (one array serves it), so
    the price per point stays that of one array; the price for capacity is said beside it.
    """
    per_point = {g.at: price_per_point(price, g.estimate.lo, g.estimate.point, g.estimate.hi)
                 for g in gains if g.id == TTFT_GAIN and g.estimate}
    units = max(1, math.ceil(capacity_needed / (capacity_tb * 1e12))) if capacity_needed else None
    return Prices(price_per_tb=price / capacity_tb, price_per_point=per_point,
                  arrays_needed=units, price_for_capacity=units * price if units else None)
