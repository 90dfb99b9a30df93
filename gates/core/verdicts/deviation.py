"""Deviations: what makes a record's verdict mean less than it says, each of a declared cause.

A deviation is a type: its cause is set where it is found and decides what it does to the
procurement summary's ACCEPT, never words parsed back from its text (rewording a message cannot
change a verdict). A rehearsal mark is never accepted and cannot be waived; a note informs;
every other cause can change what a verdict means and blocks ACCEPT until a named person waives
it (`kvgate waive`). Said once here and listed in the README ("ACCEPT means nothing is open").
Pure.
"""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_serializer,
    model_validator,
)
from typing_extensions import TypedDict

# How the G4 soak words a shortened soak (gates.soak): words for people, which classify
# nothing; a shortened soak is Cause.SHORTENED whatever its text says.
SHORTENED = "shortened: not a 72-hour sign-off"


class Effect(enum.StrEnum):
    """What a deviation does to ACCEPT."""

    REHEARSAL = "rehearsal"  # never accepted, cannot be waived
    BLOCKING = "blocking"  # blocks ACCEPT until a named person waives it
    NOTE = "note"  # informs


class Cause(enum.StrEnum):
    """Why a record deviates; each cause has one Effect (CAUSES)."""

    SIMULATED_ENGINE = "simulated engine"
    SHORTENED = "shortened soak"
    FORCED = "forced past upstream"
    NO_PREDICTION = "no pre-flight prediction"
    LIMITS_CHANGED = "limits changed"
    SITE_CHANGED = "site changed"
    BASELINE_STARVED = "baseline starved"
    BASELINE_MOVED = "baseline moved"
    GAIN_BEYOND_STORAGE = "gain beyond the arms' storage"
    OTHER_IO = "other I/O on the target"
    IO_NOT_WATCHED = "I/O on the target not watched"
    SOAK_GAP = "soak not running"
    RESUMED_OTHER_FILES = "soak resumed with other files"
    SOAK_DURATION = "soak duration"
    SOAK_WINDOW = "soak window"
    SOAK_OTHER_ENGINE = "soak on another engine"
    PAGE_CACHE_KEPT = "page cache not dropped"
    GDS_FALLBACK = "GDS falls back to POSIX"
    OTHER = "other"  # any other finding: it blocks, as nobody classified it


CAUSES: dict[Cause, tuple[Effect, str]] = {
    Cause.SIMULATED_ENGINE: (Effect.REHEARSAL, "the arms ran kvgate's simulator, not a real "
                             "engine"),
    Cause.SHORTENED: (Effect.REHEARSAL, "a G4 soak shorter than the 72 h sign-off"),
    Cause.FORCED: (Effect.REHEARSAL, "run with --force past an upstream gate that did not pass"),
    Cause.NO_PREDICTION: (Effect.NOTE, "G1 could not predict G3's gain for the sized model"),
    Cause.LIMITS_CHANGED: (Effect.BLOCKING, "thresholds.toml differs from the upstream gate's"),
    Cause.SITE_CHANGED: (Effect.BLOCKING, "the target, an arm or the eviction differs upstream"),
    Cause.BASELINE_STARVED: (Effect.BLOCKING, "other processes took the G2 baseline's CPU"),
    Cause.BASELINE_MOVED: (Effect.BLOCKING, "G3's control baseline is not the baseline G2 "
                           "qualified"),
    Cause.GAIN_BEYOND_STORAGE: (Effect.BLOCKING, "G3's gain is above the claimed band and beyond "
                                "what both arms' measured storage allows (gates.engines."
                                "fairness): a baseline slower than its own storage?"),
    Cause.OTHER_IO: (Effect.BLOCKING, "G1 saw I/O that fio did not do"),
    Cause.IO_NOT_WATCHED: (Effect.BLOCKING, "G1 could not watch the target's device"),
    Cause.SOAK_GAP: (Effect.BLOCKING, "a G4 soak resumed after a gap"),
    Cause.RESUMED_OTHER_FILES: (Effect.BLOCKING, "a G4 soak resumed with other configuration "
                                "files"),
    Cause.SOAK_DURATION: (Effect.BLOCKING, "a G4 soak planned other than thresholds.toml's "
                          "duration"),
    Cause.SOAK_WINDOW: (Effect.BLOCKING, "G4 windows other than thresholds.toml's"),
    Cause.SOAK_OTHER_ENGINE: (Effect.BLOCKING, "G4 soaked another engine than G3 measured"),
    Cause.PAGE_CACHE_KEPT: (Effect.BLOCKING, "the page-cache drop before a G3 probe was not "
                            "verified (pages stayed resident, or residency was not measured)"),
    Cause.GDS_FALLBACK: (Effect.BLOCKING, "cuFile may move the KV through POSIX, not GPU-direct, "
                         "without an error (or kvgate could not verify GDS support)"),
    Cause.OTHER: (Effect.BLOCKING, "any other finding that can change what a verdict means"),
}

# What each effect does to ACCEPT, in the words the docs' table of causes uses.
EFFECT_WORDS = {
    Effect.REHEARSAL: "never ACCEPT, cannot be waived",
    Effect.BLOCKING: "until re-run or waived",
    Effect.NOTE: "does not block",
}


def causes_table() -> str:
    """CAUSES as a markdown table (cause, effect on ACCEPT, what it is), for the docs."""
    rows = ["| cause | effect on ACCEPT | what it is |", "|---|---|---|"]
    rows += [f"| `{cause}` | **{effect}**: {EFFECT_WORDS[effect]} | {why.replace('|', '/')} |"
             for cause, (effect, why) in CAUSES.items()]
    return "\n".join(rows) + "\n"


# Records written before deviations were typed carry bare text: their cause is read from how
# the text began, for those records only (the prefixes they were classified by then).
LEGACY_PREFIXES: tuple[tuple[str, Cause], ...] = (
    ("simulated engine", Cause.SIMULATED_ENGINE), ("shortened", Cause.SHORTENED),
    ("FORCED:", Cause.FORCED), ("no pre-flight prediction", Cause.NO_PREDICTION),
    ("limits changed since", Cause.LIMITS_CHANGED), ("site changed since", Cause.SITE_CHANGED),
    ("baseline may be starved", Cause.BASELINE_STARVED),
    ("G3's baseline moved from G2's", Cause.BASELINE_MOVED),
    ("gain beyond the arms' storage", Cause.GAIN_BEYOND_STORAGE),
    ("other I/O on the target's device", Cause.OTHER_IO),
    ("other processes' I/O on the target was not watched", Cause.IO_NOT_WATCHED),
    ("not running for", Cause.SOAK_GAP), ("resumed with another", Cause.RESUMED_OTHER_FILES),
    ("duration ", Cause.SOAK_DURATION), ("window ", Cause.SOAK_WINDOW),
)


def legacy_cause(text: str) -> Cause:
    """The cause of an untyped deviation in an older record, from how its text began."""
    return next((cause for prefix, cause in LEGACY_PREFIXES if text.startswith(prefix)),
                Cause.OTHER)


class Typed(TypedDict):
    """A typed deviation as a record's JSON holds it: its cause's name and its words."""

    cause: Cause
    text: str


class Deviation(BaseModel):
    """One deviation: its cause (which decides its effect) and the words a reader sees.

    In a record's JSON a deviation is {"cause", "text"}; a bare string is an older record's
    untyped text (LEGACY_PREFIXES), read and written back as it was sealed, so that record
    still hashes as it did. Its effect is not written: it follows from the cause (CAUSES).
    """

    model_config = ConfigDict(frozen=True)

    cause: Cause
    text: str
    # Set only for bare text: an older record's, or a producer not yet converted.
    untyped: Literal[True] | None = Field(default=None, exclude=True, repr=False)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: object) -> object:
        # An older record's bare text: classified as it was when that record was written.
        if isinstance(data, str):
            return {"cause": legacy_cause(data), "text": data, "untyped": True}
        return data

    @model_validator(mode="after")
    def _said(self) -> Deviation:
        if not self.text.strip():
            raise ValueError(f"a {self.cause} deviation must say what deviated")
        return self

    @model_serializer
    def _written(self) -> Typed | str:
        return self.text if self.untyped else Typed(cause=self.cause, text=self.text)

    @property
    def effect(self) -> Effect:
        """What it does to ACCEPT: decided by its cause alone."""
        return CAUSES[self.cause][0]

    @property
    def blocks(self) -> bool:
        """Whether it blocks ACCEPT until a named person waives it."""
        return self.effect is Effect.BLOCKING

    def __str__(self) -> str:
        return self.text
