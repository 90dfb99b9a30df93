"""G4 runner overhead: CPU that kvgate itself spends per hour of soak, outside the load
generator's own work (issue 6; target <= 2 % of one core).

The soak runs with the real runner, the real store (WAL SQLite in a temporary folder) and the
real cheap collectors (kernel log, free space, process), but an idle load that just waits out
each window, so every CPU second counted is the runner's: committing windows, samples and
deviations, reading the kernel log, judging health. The fio verify pass is left out on
purpose: its CPU is fio's, in another process. Peer: the same loop with the runner replaced
by a bare sleep, to show the floor of a Python process that only waits.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import machine, own_cpu_seconds, print_table

from gates.soak import SoakPlan, SoakRunner
from gates.soak.health import FreeSpace, ProcessHealth
from gates.soak.kernel_log import KernelLog
from gates.storage import SubprocessRunner
from gates.store import Store

TARGET = 0.02


class IdleLoad:
    """The load seam with no load: each window just passes."""

    def run(self, index: int, seconds: float) -> list:
        time.sleep(seconds)
        return []


def runner_share(windows: int, window: float) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of a soak of ``windows`` idle windows."""
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder))
        store.begin_run("bench", "bench")
        plan = SoakPlan(run_id="bench", duration=windows * window, window=window,
                        g3_throughput=1.0)
        collectors = [KernelLog(SubprocessRunner()), FreeSpace(Path(folder)),
                      ProcessHealth(lambda: None)]
        cpu, wall = own_cpu_seconds(), time.monotonic()
        SoakRunner.start(store, plan, IdleLoad(), collectors=collectors).run()
        result = own_cpu_seconds() - cpu, time.monotonic() - wall
        store.close()
        return result


def sleep_share(windows: int, window: float) -> tuple[float, float]:
    """The floor: the same wall time spent in plain sleeps."""
    cpu, wall = own_cpu_seconds(), time.monotonic()
    for _ in range(windows):
        time.sleep(window)
    return own_cpu_seconds() - cpu, time.monotonic() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=12)
    parser.add_argument("--window", type=float, default=5.0, help="seconds per window")
    parser.add_argument("--plain", action="store_true", help="plain table, no colours")
    args = parser.parse_args()
    rows = []
    for name, fn in (("kvgate soak runner", runner_share), ("peer: bare sleep", sleep_share)):
        cpu, wall = fn(args.windows, args.window)
        share = cpu / wall
        per_hour = share * 3600
        rows.append([name, f"{wall:.1f}", f"{cpu:.3f}", f"{share:.2%}", f"{per_hour:.1f} s",
                     "PASS" if share <= TARGET else "MISS"])
    print(machine())
    print_table(f"Runner overhead ({args.windows} windows of {args.window:g} s; windows are "
                "committed as in a real soak; short windows overstate the per-hour cost)",
                ["what", "wall s", "CPU s", "share of one core", "CPU per hour",
                 f"target <= {TARGET:.0%}"], rows, args.plain)


if __name__ == "__main__":
    main()
