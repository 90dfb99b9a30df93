"""`python -m gates.sim`: the simulator as a standalone program (see gates.sim.cli)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
