"""The evidence chain (DESIGN §5): no single counter decides whether the KV came from storage.

Each row is one signal — an engine counter (per rank, per tier), a storage-side counter (block
devices, storage NICs, RDMA ports, the engine process's read bytes), a physical bound, or a
control (eviction, page cache, CPU tier, working set) — with its value, what agreement means,
and whether it agrees. The proof passes only when an engine counter that can decide and a
storage-side signal independently agree and nothing disagrees; a signal that could not be read
(bad input: an unpaired or reset series, a value that is not a count, a user figure the engine
contradicts) makes it an ERROR by name; a signal that disagrees fails it by name; anything short
of that is INCONCLUSIVE, never a PASS. Pure.
"""

from __future__ import annotations

import enum
import math

from pydantic import BaseModel, ConfigDict, Field

from ..core.verdicts import Coverage, Limit, Measurement, Outcome, Table


class Kind(enum.StrEnum):
    """Where a signal comes from."""

    ENGINE = "engine counter"
    STORAGE = "storage side"
    PHYSICS = "physics"
    CONTROL = "control"


class Agreement(enum.StrEnum):
    """What a signal says about the claim that the probe's KV was read from the storage."""

    AGREES = "agrees"
    DISAGREES = "disagrees"
    INCONCLUSIVE = "inconclusive"  # it cannot tell (e.g. the working set fits in memory)
    ERROR = "error"  # its input could not be read or contradicts itself: bad input, named
    ABSENT = "not exposed"  # the engine or host does not expose it: neither for nor against


class Signal(BaseModel):
    """One row of the evidence table."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: Kind
    signal: str  # what was read, e.g. 'lmcache:num_hit_tokens_total{worker_id="3"}'
    value: float | None = None
    unit: str = ""
    expected: str = ""  # what agreement means, with its numbers
    agreement: Agreement = Agreement.ABSENT
    # Why an engine counter cannot tell storage from memory on its own: "tier-blind" (counts
    # CPU-tier hits too) or "counted before the transfer". A chain whose agreeing engine
    # counters all carry a caveat passes only with a control (working set) agreeing too.
    caveat: str = ""
    rules_out_memory: bool = False  # a control that shows memory could not have served it
    # A control showing that the probe, as configured, could not examine the storage at all
    # (the engine's CPU tier holds the whole working set): inconclusive, it makes the chain
    # INCONCLUSIVE even where the engine's counters then disagree — they judge the setup,
    # not the storage.
    voids_probe: bool = False
    note: str = ""
    # The units the row is over, where it is (the level's repetitions, the engine's ranks): its
    # note says what it read; the chain's measurement carries the repetitions' (judge_chain).
    coverage: Coverage | None = Field(default=None, exclude=True)

    def line(self) -> str:
        """The row as one line of text, for notes and the `kvgate proof` output."""
        value = "—" if self.value is None else f"{self.value:,.6g} {self.unit}".strip()
        extra = "; ".join(filter(None, [self.caveat, self.note]))
        extra = f" ({extra})" if extra else ""
        return f"{self.signal} = {value}, expected {self.expected or '—'}: {self.agreement}{extra}"


class ChainWord(enum.StrEnum):
    """The chain's verdict as `kvgate proof` prints it. A type of its own, set where the chain
    is judged: rewording a reason never changes it (ERROR and INCONCLUSIVE are one outcome)."""

    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"  # a signal could not be read: bad input, named
    INCONCLUSIVE = "INCONCLUSIVE"  # every signal read, and they cannot decide


class ChainVerdict(BaseModel):
    """PASS, FAIL, ERROR or INCONCLUSIVE, with the reason a reader can check against the table."""

    word: ChainWord
    reason: str

    @property
    def outcome(self) -> Outcome:
        """PASS, FAIL, or ERROR for both ERROR and INCONCLUSIVE (neither is ever a pass)."""
        return {ChainWord.PASS: Outcome.PASS, ChainWord.FAIL: Outcome.FAIL}.get(
            self.word, Outcome.ERROR)

    @property
    def inconclusive(self) -> bool:
        """Whether the chain could not decide (an ERROR-class outcome, never a PASS)."""
        return self.outcome is Outcome.ERROR


def judge_chain(signals: list[Signal]) -> ChainVerdict:
    """The proof's verdict: every disagreement named, and PASS only for a complete chain."""
    broken = [s for s in signals if s.agreement is Agreement.ERROR]
    if broken:
        return ChainVerdict(word=ChainWord.ERROR, reason="ERROR: " + "; ".join(
            f"{s.signal}: {s.note or s.expected}" for s in broken))
    against = [s for s in signals if s.agreement is Agreement.DISAGREES]
    void = [s for s in signals if s.voids_probe and s.agreement is Agreement.INCONCLUSIVE]
    if void:
        return ChainVerdict(word=ChainWord.INCONCLUSIVE, reason="INCONCLUSIVE: " + "; ".join(
            f"{s.signal}: {s.note or s.expected}" for s in void) + "".join(
            f"; so {s.signal} disagrees without judging the storage" for s in against))
    if against:
        return ChainVerdict(word=ChainWord.FAIL, reason="; ".join(
            f"{s.signal} disagrees: {s.line()}" for s in against))
    unsure = [s for s in signals if s.agreement is Agreement.INCONCLUSIVE]
    if unsure:
        return ChainVerdict(word=ChainWord.INCONCLUSIVE, reason="INCONCLUSIVE: " + "; ".join(
            f"{s.signal}: {s.note or s.expected}" for s in unsure))
    agreeing = [s for s in signals if s.agreement is Agreement.AGREES]
    engine = [s for s in agreeing if s.kind is Kind.ENGINE]
    if not engine:
        return ChainVerdict(word=ChainWord.INCONCLUSIVE, reason=(
            "INCONCLUSIVE: no engine counter of storage reads is exposed, or none moved"))
    if not any(s.kind is Kind.STORAGE for s in agreeing):
        return ChainVerdict(word=ChainWord.INCONCLUSIVE, reason=(
            "INCONCLUSIVE: no storage-side signal agrees (name the array's block devices in "
            "[topology] devices, or its NICs in [topology] interfaces for NVMe-oF)"))
    if all(s.caveat for s in engine) and not any(s.rules_out_memory for s in agreeing):
        return ChainVerdict(word=ChainWord.INCONCLUSIVE, reason=(
            "INCONCLUSIVE: the engine's counters cannot tell storage from memory ("
            + "; ".join(f"{s.signal}: {s.caveat}" for s in engine)
            + ") and no control shows that memory could not have served the probe"))
    return ChainVerdict(word=ChainWord.PASS, reason="the engine's counters and the storage "
                        "side agree: " + ", ".join(s.signal for s in signals
                                                   if s.agreement is Agreement.AGREES))


def chain_measurement(name: str, signals: list[Signal]) -> Measurement:
    """The chain as one measurement: disagreeing signals counted, held against 0, over the
    repetitions whose evidence the chain read (the row that carries their Coverage)."""
    verdict = judge_chain(signals)
    disagreeing = sum(s.agreement is Agreement.DISAGREES for s in signals)
    limit = Limit.at_most(0, "signals")
    if verdict.inconclusive:
        m = Measurement.error(name, verdict.reason, limit)
    else:
        m = Measurement.measured(name, disagreeing, limit, note=verdict.reason)
    covered = [s.coverage for s in signals if s.coverage is not None
               and s.coverage.what == "repetitions"]
    return covered[0].judge(m) if covered else m


def evidence_table(signals: list[Signal]) -> Table:
    """The chain as the report's table: signal, kind, value, expected, agrees?, note."""
    return Table(columns=["signal", "kind", "value", "expected", "agrees?", "note"], rows=[
        [s.signal, str(s.kind), "—" if s.value is None else f"{s.value:,.6g} {s.unit}".strip(),
         s.expected or "—", str(s.agreement), "; ".join(filter(None, [s.caveat, s.note]))]
        for s in signals])


def within(value: float | None, lo: float, hi: float | None = None) -> Agreement:
    """AGREES when lo <= value (<= hi), DISAGREES otherwise, ABSENT when not measured."""
    if value is None:
        return Agreement.ABSENT
    ok = value >= lo and (hi is None or value <= hi)
    return Agreement.AGREES if ok else Agreement.DISAGREES


def bad(value: float | None) -> bool:
    """A figure that is there and is not a count (not finite, or negative)."""
    return value is not None and not (math.isfinite(value) and value >= 0)


def bounded(value: float | None, floor: float, ceiling: float) -> tuple[Agreement, str]:
    """A count against its floor and ceiling: not a count ERROR, over the ceiling undecided."""
    if value is None:
        return Agreement.ABSENT, ""
    if bad(value):
        return Agreement.ERROR, f"{value!r} is not a count: refused as bad input"
    if value > ceiling:
        return Agreement.INCONCLUSIVE, (
            f"more than the probe could have read ({ceiling:,.0f}): the counter counts other "
            "requests or another unit, so it cannot show what this probe read")
    return within(value, floor), ""
