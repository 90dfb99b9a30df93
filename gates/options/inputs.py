"""What a user types, checked where it is parsed (argparse's and pytest's type=), for every
command: a refusal is one line naming the option (argparse adds "argument --out:"), the value
and what would do, before any work starts, never a traceback after it.
"""

from __future__ import annotations

import math
import os
import re
import stat
import tempfile
from argparse import ArgumentTypeError
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.quantities import UnitError, parse_duration
from ..core.text import refusal
from ..core.verdicts import check_run_id

_KINDS = ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def input_file(text: str) -> Path:
    """A file kvgate reads (--site, --trace …): what is there must be a regular file, checked
    before it is opened (a FIFO blocks the open, /dev/zero never ends); an absent one is the
    reader's to name, as some fall back on a default."""
    path = Path(text)
    try:
        if path.exists() and not path.is_file():
            raise ArgumentTypeError(f"{text} is {_kind(path)}, not a regular file")
    except OSError as exc:
        raise ArgumentTypeError(f"{text}: {exc.strerror}") from None
    return path


def _writable(text: str, where: Path, existing: Path | None = None) -> None:
    # Tried, not judged from mode bits: root passes every access() check, yet nothing can be
    # made in /proc or on a read-only mount. The probe file goes at once; an existing file is
    # opened for appending, which changes neither its bytes nor its times.
    try:
        if existing is not None:
            existing.open("ab").close()
            return
        handle, probe = tempfile.mkstemp(dir=where, prefix=".kvgate-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ArgumentTypeError(f"{text}: cannot write in {existing or where}: "
                                f"{exc.strerror}") from None


def run_id(text: str) -> str:
    """--run-id: a plain folder name under --out (pytest-html writes its page there first);
    "" is the default, a new id (argparse passes a string default through type= too)."""
    try:
        return check_run_id(text) if text else text
    except ValueError as exc:
        raise ArgumentTypeError(f"{exc} under --out (no '/', no '..', no control "
                                "characters)") from None


def output_file(text: str) -> Path:
    """A file kvgate writes when its work is done (--json FILE): not a directory, in a folder
    that takes a new file; a device or pipe already there (/dev/stdout) is taken as it is."""
    path, parent = Path(text), Path(text).parent
    if path.is_dir():
        raise ArgumentTypeError(f"{text} is a directory: name a file to write")
    if not parent.is_dir():
        why = "is not a folder" if parent.exists() else "does not exist"
        raise ArgumentTypeError(f"{text}: its folder {parent} {why}")
    if path.is_file() or not path.exists():
        _writable(text, parent, path if path.exists() else None)
    return path


def folder(text: str) -> Path:
    """A folder kvgate reads and may write (--out of the run commands): nothing on its way may be
    a file. Writing is the store's to try (it says why it cannot before any gate runs), as
    `kvgate soak status` only reads, on a read-only mount too."""
    path = Path(text)
    _nearest_folder(text, path)
    return path


def output_dir(text: str) -> Path:
    """A folder kvgate writes into (key new --out, loadgen --out), made with its parents when
    absent: the nearest one that exists must take a new file."""
    path = Path(text)
    _writable(text, _nearest_folder(text, path))
    return path


def _nearest_folder(text: str, path: Path) -> Path:
    nearest = next((p for p in (path, *path.parents) if p.exists()), Path.cwd())
    if not nearest.is_dir():
        raise ArgumentTypeError(f"{text}: {nearest} is {_kind(nearest)}, not a folder")
    return nearest


# The longest time a kvgate setting may hold (the core's units.MAX_DURATION, ten 72-hour soaks):
# a timeout beyond it is no timeout, and such numbers overflow the timers they reach.
LONGEST_S = parse_duration("30d")


def _shown(x: float) -> str:
    if isinstance(x, int):  # exact, however long: float() of 400 digits overflows
        return f"{x:,}" if abs(x) < 10**18 else f"{str(x)[:8]}… ({len(str(abs(x)))} digits)"
    return f"{int(x):,}" if math.isfinite(x) and x == int(x) and abs(x) < 1e18 else f"{x:g}"


@dataclass(frozen=True)
class Range:
    """A number an option takes: finite, from ``low`` (above it when ``above``) to ``high``,
    whole when ``whole``. Called, it is argparse's type=; ``refusal`` checks a value another
    parser gave (the post-parse checks of `kvgate model` and `engine install --jobs`)."""

    low: float
    high: float
    whole: bool = False
    above: bool = False
    unit: str = ""  # what it counts, said in the refusal
    zero: bool = False  # 0 itself too ("none"), below low: a rate that is off or at least low

    def said(self) -> str:
        """The range in words: "a whole number from 1 to 4,194,304 (tokens)"."""
        span = (f"above {_shown(self.low)} and at most" if self.above else
                f"from {_shown(self.low)} to")
        return (("0, or " if self.zero else "")
                + f"{'a whole number' if self.whole else 'a number'} {span} {_shown(self.high)}"
                + (f" ({self.unit})" if self.unit else ""))

    def holds(self, value: float) -> bool:
        """Whether a value is in the range (NaN and the infinities never are)."""
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.zero and value == 0:
            return True
        return ((not self.whole or value == int(value)) and value <= self.high
                and (value > self.low if self.above else value >= self.low))

    def __call__(self, text: str) -> int | float:
        words, value = text.strip(), None
        if self.whole:  # digits only: "1e3" and "2.0" are not counts
            value = int(words) if re.fullmatch(r"[+-]?[0-9]{1,30}", words) else None
        elif re.fullmatch(r"[0-9a-zA-Z.+-]+", words):  # float() also takes "1_0"
            value = float(words) if _is_float(words) else None
        if value is None or not self.holds(value):
            raise ArgumentTypeError(f"{text!r} is not {self.said()}")
        return value

    def refusal(self, option: str, value: float | None) -> str:
        """Why a parsed value is refused, naming the option and the value ("": it is not)."""
        if value is None or self.holds(value):
            return ""
        return f"{option} {_shown(value)}: give {self.said()}"


def _is_float(words: str) -> bool:
    try:
        float(words)
    except ValueError:
        return False
    return True


def duration_text(low_s: float) -> Callable[[str], str]:
    """A time with its unit ("10m") from ``low_s`` to the core's longest (30 days); the text
    is kept, as the run options hand it on."""
    def parse(text: str) -> str:
        if text == "":  # the default, unset (argparse and pytest hand a str default in too)
            return text
        try:
            seconds = parse_duration(text)
        except UnitError as exc:
            raise ArgumentTypeError(str(exc)) from None
        if seconds < low_s:
            raise ArgumentTypeError(f"{text!r} is shorter than {low_s:g} s: give a time such "
                                    "as '10m'")
        return text
    return parse


def plain_text(text: str) -> str:
    """A name or a reason a person types: printed among kvgate's lines, so no control
    character (an escape sequence or a line break would forge a line; gates.core.text)."""
    if problem := refusal(text, "the text"):
        raise ArgumentTypeError(problem)
    return text
