"""G4 report rendering on a synthetic 72-hour store with 1-second samples (issue 6; target
<= 5 s and <= 500 MB peak).

Builds a store with 259,200 samples per series for every series the G4 chart draws, then
times what the report does with them: read every series back from SQLite and draw the
stacked time-series chart as inline SVG. Peak memory is the process's peak RSS growth
(resource.getrusage) while rendering. Peer: reading the same rows with a bare SQL query and
no chart, to show how much of the time is the store and how much the drawing.
"""

from __future__ import annotations

import argparse
import math
import resource
import tempfile
import time
from pathlib import Path

from _common import machine, print_table

from gates.charts import time_series
from gates.store import Store

SERIES = ["g4.throughput", "g4.ttft_p50", "g4.ttft_p99", "g4.errors",
          "g4.smart.media_errors_delta", "g4.smart.temperature_max_c"]
SECONDS = 72 * 3600


def build(store: Store, seconds: int) -> None:
    """One sample per second per series, shaped like a soak (a slow daily wave plus noise)."""
    store.begin_run("soak72", "bench")
    for k, series in enumerate(SERIES):
        store.add_samples("soak72", "g4", series, (
            (float(t), 100 + 10 * math.sin(t / 86400 * 2 * math.pi) + (t * 7919 + k) % 13)
            for t in range(seconds)))


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=72.0)
    parser.add_argument("--plain", action="store_true")
    args = parser.parse_args()
    seconds = int(args.hours * 3600)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        store = Store(Path(d))
        started = time.monotonic()
        build(store, seconds)
        built = time.monotonic() - started
        base = peak_mb()
        started = time.monotonic()
        rows = store.db.execute("SELECT COUNT(*), SUM(value) FROM samples").fetchone()
        peer = time.monotonic() - started
        started = time.monotonic()
        svg = time_series([(s, "", store.samples("soak72", s)) for s in SERIES])
        render = time.monotonic() - started
        grown = peak_mb() - base
        store.close()
    print(machine())
    print(f"store: {rows[0]:,} samples ({seconds:,} per series x {len(SERIES)}), built in "
          f"{built:.1f} s")
    print_table("Rendering the G4 time series of a 72-hour soak",
                ["what", "seconds", "peak RSS growth MB", "SVG KB", "target"],
                [["kvgate: read all series + draw the chart", f"{render:.2f}", f"{grown:.0f}",
                  f"{len(svg) / 1024:.0f}",
                  "PASS" if render <= 5 and grown <= 500 else "MISS (<= 5 s, <= 500 MB)"],
                 ["peer: one SQL aggregate over the same rows, no chart", f"{peer:.2f}", "-",
                  "-", f"ratio {render / peer:.1f}x" if peer else "-"]], args.plain)


if __name__ == "__main__":
    main()
