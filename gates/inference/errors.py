"""The one error a phase of an arm's run raises: kept apart so every module can raise it."""


class PhaseError(Exception):
    """A phase could not run (endpoint down, metrics unreadable); the message names the URL."""
