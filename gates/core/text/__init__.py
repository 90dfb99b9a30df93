"""Text a user typed, as the terminal may show it: control characters escaped, or refused. Pure."""

from .terminal import refusal, shown

__all__ = ["refusal", "shown"]
