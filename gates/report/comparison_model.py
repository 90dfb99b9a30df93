"""What a comparison of candidate arrays states (compare-…/comparison.json), column by column.

compare.py makes one from a store; comparison_page.py writes it; comparison_check.py checks
one that was written against the records it cites.
"""

from __future__ import annotations

from pydantic import BaseModel

from .. import __version__
from ..model import Estimate, PricePerPoint, Ranked
from .summary import ITEMS_TESTED, SignerInfo

GAINS = {"g3.ttft_p50_reduction": "TTFT p50 reduction", "g3.throughput_gain": "throughput gain"}
NO_RECORD = "NO RECORD"


class CompareError(ValueError):
    """A comparison that cannot be made from what was named (a run, an array)."""


class Gain(BaseModel):
    """One G3 gain of one candidate at one concurrency level, as its record states it."""

    id: str
    at: int
    outcome: str
    estimate: Estimate | None  # None: the record states no interval (or no level) for it
    note: str = ""


class Figure(BaseModel):
    """One G1 figure of a candidate."""

    id: str
    name: str
    value: float | None
    unit: str
    outcome: str
    limit: str = ""  # the bound the site's G1 held it against (thresholds.toml)
    note: str = ""  # G1's own words, e.g. "92 % of the 12.5 GB/s ceiling (site [topology])"


class Cited(BaseModel):
    """One record a column stands on, by the hash the store holds (verify finds it by that)."""

    gate: str
    run_id: str
    record_sha256: str


class CitedSweep(BaseModel):
    """A candidate's working-set sweep (kvgate sweep), by its folder and its own SHA-256."""

    id: str  # its folder beside the runs: sweep-<run>
    sweep_sha256: str
    break_even: int | None  # bytes: from here up both gains clear G3's limits; None: nowhere
    proof_from: int | None  # bytes: from here up the chain proves storage reads
    engine: str
    simulated: bool


class Column(BaseModel):
    """One candidate: its chain's verdicts, G1 figures, G3 gains and prices."""

    run_id: str
    array: str
    site: str
    verdicts: dict[str, str]  # gate -> verdict, or NO RECORD
    chain: list[str]  # how each link holds (or why not)
    records: list[Cited] = []
    thresholds_sha256: str = ""
    workload_hash: str = ""
    limits_profile: str = ""
    simulated: bool = False  # G3's arms ran kvgate's simulator, not a real engine
    g1: list[Figure] = []
    gains: list[Gain] = []
    price: float | None = None
    capacity_tb: float | None = None
    price_per_tb: float | None = None
    price_per_point: dict[int, PricePerPoint] = {}  # concurrency -> per point of TTFT p50
    arrays_needed: int | None = None  # to hold Comparison.capacity_needed
    price_for_capacity: float | None = None
    price_note: str = ""
    sweep: CitedSweep | None = None  # where it starts to pay, when a sweep was named for it


class Ranking(BaseModel):
    """One gain at one level, across the candidates that state it."""

    id: str
    at: int
    ranked: list[Ranked] = []
    lines: list[str] = []
    unranked: list[str] = []  # candidates whose record gives no interval here, and why


class Comparison(BaseModel):
    """What `kvgate compare` writes (compare-*.json) and prints."""

    kind: str = "kvgate comparison"
    created: str
    columns: list[Column]
    differences: list[str]  # what the chains do not share; a workload difference stops ranking
    rankings: list[Ranking] = []
    risk: str = ""
    capacity_needed: int = 0  # bytes of KV the site must hold (--capacity); 0: not given
    currency: str = ""  # the catalogue's ISO 4217 code and symbol, for every price
    symbol: str = ""
    kvgate_version: str = __version__
    signer: SignerInfo | None = None  # None: unsigned
    statement: str = ITEMS_TESTED

    @property
    def id(self) -> str:
        """The comparison's name, and its folder's: when it was made and which runs it holds."""
        stamp = self.created.replace(":", "").replace("-", "").replace("+0000", "Z")
        return f"compare-{stamp}-{'-'.join(col.run_id[-6:] for col in self.columns)}"
