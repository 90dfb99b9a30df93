"""``python -m faultfs BACKING MOUNTPOINT SOCKET [--cached]``: serve BACKING at MOUNTPOINT
with faults set over the Unix socket SOCKET, in the foreground until unmounted."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import mfusepy

from .control import serve
from .faults import FaultTable
from .passthrough import FaultPassthrough


def main() -> None:
    parser = argparse.ArgumentParser(prog="faultfs", description=__doc__)
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("socket", type=Path)
    parser.add_argument("--cached", action="store_true", help=(
        "let the kernel cache file data (without it the mount is direct_io: every read and "
        "write reaches the filesystem, as O_DIRECT does on a block device)"))
    args = parser.parse_args()
    table = FaultTable()
    server = serve(args.socket, table)
    try:
        # libfuse3 options (mount.fuse3(8)): direct_io is a fuse_config field, set by mfusepy
        # in init; allow_other (root only, without /etc/fuse.conf's user_allow_other) lets
        # processes of other users (an engine) use the mount.
        mfusepy.FUSE(FaultPassthrough(str(args.backing), table), str(args.mountpoint),
                     foreground=True, direct_io=not args.cached, fsname="faultfs",
                     allow_other=os.geteuid() == 0)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
