"""Cost model: an array catalogue → price per TB, per GB/s and per unit of TTFT gain; ranking."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..core.configuration import shipped
from ..core.quantities import Rate
from .bandwidth import RestoreModel, predict
from .files import read_object

RANK_KEYS = ("ttft", "workload", "tb", "gbps")

SHIPPED_CATALOG = shipped("catalog") / "arrays.toml"


class CatalogError(ValueError):
    """A catalogue file that cannot be read, naming the file and key."""


class ArrayOption(BaseModel):
    """One array that can be bought: price, capacity, read bandwidth, and how we know them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    price: float = Field(gt=0, allow_inf_nan=False)
    capacity_tb: float = Field(gt=0, allow_inf_nan=False)
    read_bandwidth: Rate = Field(gt=0)
    # How far to trust read_bandwidth; the table prints it beside every figure.
    bandwidth_basis: Literal["measured", "seed-measured", "vendor", "link-ceiling", "example"]
    link: Rate | None = None
    quoted_price_per_tb: float | None = Field(default=None, gt=0)
    note: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ArrayOption:
        if self.quoted_price_per_tb is not None:
            # Quotes are rounded to whole currency units per TB: allow 0.5 % either way.
            derived = self.price / self.capacity_tb
            if abs(derived - self.quoted_price_per_tb) > 0.005 * self.quoted_price_per_tb:
                raise ValueError(f"price / capacity_tb = {derived:,.0f} per TB, but "
                                 f"quoted_price_per_tb says {self.quoted_price_per_tb:,.0f}")
        if self.link is not None and self.read_bandwidth > self.link:
            raise ValueError(f"read_bandwidth {self.read_bandwidth / 1e9:g} GB/s exceeds the "
                             f"link ceiling {self.link / 1e9:g} GB/s")
        return self


class Catalog(BaseModel):
    """A currency and the arrays on offer."""

    model_config = ConfigDict(extra="forbid")

    currency: str = "CNY"
    symbol: str = "¥"
    source: str = ""
    arrays: list[ArrayOption] = Field(min_length=1)


def parse_catalog(data: dict, path: Path | str = "catalog") -> Catalog:
    """A Catalog from parsed TOML ([catalog] table and [[array]] entries)."""
    body = {**data.get("catalog", {}), "arrays": data.get("array", [])}
    extra = sorted(set(data) - {"catalog", "array"})
    if extra:
        raise CatalogError(f"{path}: unknown top-level key {extra[0]!r} (use [catalog] and "
                           "[[array]])")
    try:
        return Catalog.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = list(err["loc"])
        if loc[:1] == ["arrays"]:
            loc[0] = "array"
            if len(loc) > 1 and isinstance(loc[1], int):
                names = data.get("array", [])
                name = names[loc[1]].get("name", "?") if loc[1] < len(names) else "?"
                loc[1] = f"[{loc[1]}] ({name})"
        else:
            loc = ["catalog", *loc]
        key = ".".join(str(x) for x in loc).replace(".[", "[")
        raise CatalogError(f"{path}: {key}: {err['msg']}") from None


def load_catalog(path: Path | str) -> Catalog:
    """Read and validate a catalogue TOML file."""
    path = Path(path)
    return parse_catalog(read_object(path, CatalogError, "TOML"), path)


class CostRow(BaseModel):
    """One array's figures for one workload."""

    name: str
    basis: str
    price: float
    capacity_bytes: float
    read_bps: float
    price_per_tb: float
    price_per_gbps: float
    units_needed: int  # arrays needed for the capacity; 1 when no capacity was asked for
    workload_price: float
    restore_s: float
    ttft_s: float
    ttft_reduction: float | None  # fraction vs the baseline
    seconds_saved: float | None  # TTFT seconds saved per request vs the baseline
    price_per_pct: float | None  # workload price per percentage point of TTFT reduction
    price_per_s_saved: float | None  # workload price per TTFT second saved per request
    note: str = ""  # the catalogue's note: where the figures come from


def evaluate(catalog: Catalog, kv_bytes: float, *, capacity_bytes: float = 0.0,
             restore: RestoreModel | None = None, baseline_bps: float | None = None,
             recompute_s: float | None = None) -> list[CostRow]:
    """Every array's prices per TB, per GB/s and per unit of TTFT gain, in catalogue order."""
    rows = []
    for a in catalog.arrays:
        cap = a.capacity_tb * 1e12
        units = max(1, math.ceil(capacity_bytes / cap)) if capacity_bytes > 0 else 1
        # Extra arrays bought for capacity are not counted as extra bandwidth: one context
        # is restored from one array.
        p = predict(kv_bytes, a.read_bandwidth, restore, baseline_bps=baseline_bps,
                    recompute_s=recompute_s)
        total = units * a.price
        gain = p.ttft_reduction if p.ttft_reduction is not None and p.ttft_reduction > 0 else None
        saved = p.baseline_ttft_s - p.ttft_s if p.baseline_ttft_s is not None else None
        rows.append(CostRow(
            name=a.name, basis=a.bandwidth_basis, price=a.price, capacity_bytes=cap,
            read_bps=a.read_bandwidth, price_per_tb=a.price / a.capacity_tb,
            price_per_gbps=a.price / (a.read_bandwidth / 1e9), units_needed=units,
            workload_price=total, restore_s=p.restore_s, ttft_s=p.ttft_s,
            ttft_reduction=p.ttft_reduction, seconds_saved=saved,
            price_per_pct=total / (gain * 100) if gain else None,
            price_per_s_saved=total / saved if saved and saved > 0 else None, note=a.note))
    return rows


def rank(rows: list[CostRow], by: str = "ttft") -> list[CostRow]:
    """Rows best first: cheapest per TTFT point, per workload, per TB or per GB/s."""
    key = {"ttft": lambda r: r.price_per_pct, "workload": lambda r: r.workload_price,
           "tb": lambda r: r.price_per_tb, "gbps": lambda r: r.price_per_gbps}.get(by)
    if key is None:
        raise ValueError(f"rank by one of {', '.join(RANK_KEYS)}, not {by!r}")
    # Options with no gain have no price per gain: they go last, in catalogue order.
    return sorted(rows, key=lambda r: (key(r) is None, key(r) or 0.0))


class PricePerPoint(BaseModel):
    """An array's price per percentage point of a measured gain, with the interval's range."""

    point: float | None  # price / the gain's point estimate; None when the point is no gain
    low: float | None  # price / the interval's top: the cheapest the interval allows
    high: float | None  # price / the interval's bottom; None when it reaches 0 (no bound)
    note: str = ""


def price_per_point(price: float, lo: float, point: float, hi: float) -> PricePerPoint:
    """The price of one point of a gain measured as point % in [lo, hi] % (G3, kvgate compare).

    A gain whose interval reaches 0 has no upper bound on its price per point: said, not
    printed as a figure.
    """
    if not all(math.isfinite(v) for v in (price, lo, point, hi)) or price <= 0:
        raise ValueError(f"price {price!r} and gain {point!r} [{lo!r}, {hi!r}] must be finite, "
                         "the price above 0")
    if not lo <= point <= hi:
        raise ValueError(f"gain {point:g} % is outside its interval [{lo:g}, {hi:g}]")
    if hi <= 0:
        return PricePerPoint(point=None, low=None, high=None,
                             note=f"no gain: the interval [{lo:.1f}, {hi:.1f}] % holds no "
                                  "positive value, so no price per point")
    note = "" if lo > 0 else (f"the interval reaches {lo:.1f} %: the price per point has no "
                              "upper bound")
    return PricePerPoint(point=price / point if point > 0 else None, low=price / hi,
                         high=price / lo if lo > 0 else None, note=note)
