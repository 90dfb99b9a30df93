"""fio's JSON (json+) output as typed models, and the arithmetic on it. Pure: no I/O."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

ALL_CLIENTS = "All clients"
U64 = 2**64
# fio's counters are unsigned 64-bit: anything larger is garbage (and overflows float maths).
Count = Annotated[int, Field(ge=0, lt=U64)]


class FioParseError(ValueError):
    """fio output that is not the JSON we asked for; the message says what was wrong."""


class _Lenient(BaseModel):
    # fio adds fields between versions; we read what we need and ignore the rest.
    # Its figures are always finite: a NaN or Infinity is garbage, not a measurement.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)


class Latency(_Lenient):
    """A latency block such as ``clat_ns``: summary, percentiles (string keys), json+ bins."""

    min: float = 0
    max: float = 0
    mean: float = 0
    stddev: float = 0
    N: Count = 0
    percentile: dict[str, Count] | None = None
    bins: dict[str, Count] | None = None

    @field_validator("bins")
    @classmethod
    def _bucket_values(cls, bins: dict[str, int] | None) -> dict[str, int] | None:
        # json+ bins map a bucket's latency in ns (an integer, as a string) to a count.
        for key in bins or {}:
            try:
                value = int(key)
            except ValueError:
                value = -1
            if not 0 <= value < U64:
                raise ValueError(f"bin {key!r} is not a latency in ns")
        return bins

    def percentile_ns(self, p: float) -> float | None:
        """The p-th percentile in ns from the bins (preferred) or fio's own table."""
        if self.bins:
            return percentile_from_bins(self.bins, p)
        if self.percentile:
            return self.percentile.get(f"{p:.6f}")
        return None


class Direction(_Lenient):
    """One I/O direction (read, write or trim) of a job."""

    io_bytes: Count = 0
    bw_bytes: float = 0
    iops: float = 0
    runtime: Count = 0  # ms
    total_ios: Count = 0
    clat_ns: Latency = Latency()
    lat_ns: Latency = Latency()


class SteadyStateData(_Lenient):
    bw_mean: float = 0
    iops_mean: float = 0
    bw: list[float] = Field(default_factory=list)  # bytes/s, one per second of the window
    iops: list[float] = Field(default_factory=list)


class SteadyStateBlock(_Lenient):
    """fio's ``steadystate`` block: what it looked for and whether it found it."""

    ss: str = ""
    duration: int = 0
    attained: bool = False
    criterion: str = ""
    max_deviation: float = 0
    slope: float = 0
    data: SteadyStateData = SteadyStateData()


class FioJob(_Lenient):
    """One entry of ``jobs`` (or ``client_stats`` in client/server mode)."""

    jobname: str
    groupid: int = 0
    error: int = 0
    # fio 3.33 stat.c show_thread_status_json: "total_err" counts the job's I/O errors that
    # continue_on_error let it go past (with continue_on_error=verify, its failed blocks).
    total_err: Count = 0
    read: Direction = Direction()
    write: Direction = Direction()
    job_runtime: Count = 0  # ms
    job_options: dict[str, str | int | float] = Field(default_factory=dict, alias="job options")
    steadystate: SteadyStateBlock | None = None
    hostname: str | None = None
    port: int | None = None


class DiskUtil(_Lenient):
    name: str
    util: float = 0
    read_ios: int = 0
    write_ios: int = 0
    hostname: str | None = None


class FioReport(_Lenient):
    """A whole fio JSON document."""

    fio_version: str = Field(default="", alias="fio version")
    jobs: list[FioJob] = Field(default_factory=list)
    client_stats: list[FioJob] = Field(default_factory=list)
    disk_util: list[DiskUtil] = Field(default_factory=list)
    # Not fio's: the hosts kvgate asked to run each job on, by job name, as fio names them
    # (fiorun.run_step sets it from the step, never from fio's output; [] is this machine).
    # None: a report read without its plan.
    planned: dict[str, list[str]] | None = Field(default=None, exclude=True)

    def entries(self) -> list[FioJob]:
        """Per-job (or per-client job) entries, without fio's own "All clients" sum."""
        return self.jobs + [j for j in self.client_stats if j.jobname != ALL_CLIENTS]

    def named(self, jobname: str) -> list[FioJob]:
        """Every entry of one job: several with numjobs>1 or several hosts."""
        return [j for j in self.entries() if j.jobname == jobname]

    def hosts(self) -> list[str]:
        """The hosts of a client/server run, in order; empty for a local run."""
        return list(dict.fromkeys(j.hostname for j in self.client_stats
                                  if j.hostname and j.jobname != ALL_CLIENTS))


def _json_start(text: str) -> int:
    """Where fio's JSON begins: the first line that opens with "{", else the first "{"."""
    # Notes fio prints before the JSON ("note: ...", "fio: pid=...") may contain braces.
    if text.startswith("{"):
        return 0
    line = text.find("\n{")
    return line + 1 if line >= 0 else text.find("{")


def parse_fio_json(text: str) -> FioReport:
    """Parse fio's JSON, skipping any notes fio printed before the opening brace."""
    start = _json_start(text)
    if start < 0:
        raise FioParseError("no JSON object in fio output" + (f": {text[:200]!r}" if text
                                                                 else " (it was empty)"))
    try:
        document = json.JSONDecoder().raw_decode(text[start:])[0]
    except json.JSONDecodeError as exc:
        raise FioParseError(f"fio output is not valid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:
        # json raises these for numbers over Python's digit limit and for deep nesting.
        raise FioParseError(f"fio output is not usable JSON: {exc}") from None
    if not isinstance(document, dict):
        raise FioParseError("fio output is JSON but not an object")
    try:
        report = FioReport.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise FioParseError(f"unexpected fio JSON at {where}: {first['msg']}") from None
    if not report.jobs and not report.client_stats:
        raise FioParseError("fio JSON has neither 'jobs' nor 'client_stats'")
    return report


def merge_bins(blocks: list[Latency]) -> dict[str, int]:
    """Sum json+ latency histograms, e.g. from several jobs or several hosts."""
    merged: dict[str, int] = {}
    for block in blocks:
        for key, count in (block.bins or {}).items():
            merged[key] = merged.get(key, 0) + count
    return merged


def percentile_from_bins(bins: dict[str, int], p: float) -> float | None:
    """The p-th percentile (0-100) of a json+ histogram, as fio computes it: the bucket value."""
    buckets = sorted((int(k), c) for k, c in bins.items() if c > 0)
    total = sum(c for _, c in buckets)
    if not total:
        return None
    rank = p / 100.0 * total
    seen = 0
    for value, count in buckets:
        seen += count
        if seen >= rank:
            return float(value)
    return float(buckets[-1][0])


def combine(entries: list[FioJob], direction: str) -> Direction:
    """One direction summed over entries: bandwidth and IOPS add, latencies pool their bins."""
    parts = [getattr(e, direction) for e in entries]
    clat = [p.clat_ns for p in parts]
    n = sum(c.N for c in clat)
    bins = merge_bins(clat)
    # model_construct: sums of valid figures need no re-validation (and may pass 2**64).
    return Direction.model_construct(
        io_bytes=sum(p.io_bytes for p in parts),
        bw_bytes=sum(p.bw_bytes for p in parts),
        iops=sum(p.iops for p in parts),
        runtime=max((p.runtime for p in parts), default=0),
        total_ios=sum(p.total_ios for p in parts),
        clat_ns=Latency.model_construct(
            N=n,
            min=min((c.min for c in clat if c.N), default=0),
            max=max((c.max for c in clat), default=0),
            mean=sum(c.mean * c.N for c in clat) / n if n else 0,
            bins=bins or None,
            percentile=clat[0].percentile if len(clat) == 1 else None,
        ),
    )


def samples_support(n: int, p: float) -> bool:
    """Whether n samples can support a p-th percentile: n >= 10 / (1 - p/100)."""
    if not 0 <= p < 100:
        return False
    # Decimal from the written form: in binary floats 10 / (1 - 0.999) is 10000.0000000011.
    return n >= math.ceil(10 / ((100 - Decimal(str(p))) / 100))
