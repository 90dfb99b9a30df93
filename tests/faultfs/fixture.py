"""The pytest fixture: ``faultfs`` is a mounted fault filesystem with no faults set yet.

Use it with ``from faultfs.fixture import faultfs  # noqa: F401`` in a test module. It skips the
test, saying how to install what is missing, where FUSE cannot be used; `make test` installs it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .mount import FaultFS, missing, mounted


def need_fuse() -> None:
    """Skip the calling test, with what is missing and how to install it, unless FUSE works."""
    if why := missing():
        pytest.skip(f"needs a FUSE fault filesystem: {why}")


@pytest.fixture
def faultfs() -> Iterator[FaultFS]:
    """A fault filesystem mounted for one test and unmounted after it, whatever happened."""
    need_fuse()
    # Not under tmp_path: pytest keeps and later deletes those trees, and a walk into a stale
    # mount would fail there; this directory is removed here, once unmounted.
    with tempfile.TemporaryDirectory(prefix="kvgate-faultfs-") as root, mounted(Path(root)) as fs:
        yield fs
