"""The one place that decides what of a user's text may reach a terminal as it is.

A name, a reason or a site name is printed among kvgate's own lines: an escape sequence in it
(ESC [ 2 K, a carriage return) can rewrite the line it is on, a newline can forge a line of its
own ("PASS"), and a bidirectional override can reorder what is read. Every character of those
kinds (Unicode categories Cc, Cf, Zl, Zp, and Cs: the undecodable bytes of an argument) is shown
as its escape, \\x1b, \\n, \\u202e; everything else is printed as typed. Where kvgate takes such
text in (a TOML file, an option), it refuses it instead, naming the character and its place.
"""

from __future__ import annotations

import unicodedata

CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in CONTROL_CATEGORIES


def _escaped(char: str) -> str:
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else
                                f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def shown(text: object) -> str:
    """The text as one terminal line may show it: each control character as its escape."""
    text = str(text)
    if not any(_is_control(c) for c in text):
        return text
    return "".join(_escaped(c) if _is_control(c) else c for c in text)


def control_in(text: str) -> tuple[int, str] | None:
    """(position, escape) of the first control character in text, or None."""
    return next(((i, _escaped(c)) for i, c in enumerate(text) if _is_control(c)), None)


def refusal(text: str, what: str = "") -> str:
    """Why text is refused ("" when it holds no control character); what: how to name it
    ("--by"), or "" where the caller names the text itself (a configuration key)."""
    found = control_in(text)
    if found is None:
        return ""
    at, escape = found
    head = f"{what} '{shown(text)}' holds" if what else "holds"
    return (f"{head} the control character {escape} at position {at + 1}: write it as plain "
            "text (no escape sequences, tabs or line breaks)")
