"""A child a test sends Ctrl-C (SIGINT) to gets it as it would in a terminal.

A shell runs a background job with SIGINT ignored (POSIX, for a shell without job control:
`make test &`, a CI runner's `sh -c '... &'`), and a child inherits that; Python then installs no
KeyboardInterrupt handler, so the test's Ctrl-C would be lost however kvgate handles it (seen
2026-12-07: a clean clone's `make test` started in the background failed both Ctrl-C tests).
"""

import signal


def sigint_as_in_a_terminal() -> None:
    """preexec_fn: SIGINT to its default disposition before exec; Python then raises
    KeyboardInterrupt on it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
