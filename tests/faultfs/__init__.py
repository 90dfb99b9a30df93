"""A fault-injecting FUSE filesystem for kvgate's own tests: a passthrough of a plain directory
that, on command over a Unix socket, returns an errno (EIO, ENOSPC, EROFS …) on reads or writes
after N operations or on a byte range, shortens writes, delays a share of operations (fixed or
heavy-tailed) or flips bytes on read. Test code, not kvgate: it lives in the test tree."""

from .faults import Decision, Fault, FaultTable, flipped
from .mount import INSTALL, FaultFS, missing, mounted

__all__ = ["INSTALL", "Decision", "Fault", "FaultFS", "FaultTable", "flipped", "missing",
           "mounted"]
