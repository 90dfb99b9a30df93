"""Progress lines at any width (#47): at 80 columns and without a terminal (a log file) nothing
is cut, and G3's bar states its plan and counts towards the next look, not the budget."""

import io
import os
import re
import subprocess
import sys

from rich.console import Console
from rich.progress import Progress

from gates.storage.progress import LookProgress, plan_text

LONG = "/a/target/directory/deep/enough/to/pass/eighty/columns/on/its/own/kvgate-read.dat"
SCRIPT = f"""
from gates.storage import look_progress, step_progress
with step_progress("G1 fio", 60) as bar:
    bar.tick("kv_restore: 16 jobs x QD 4 on {LONG}", 1, 10)
    bar.step_done(10)
with look_progress("G3 pairs", [7, 14, 84], [8, 16], 4500) as bar:
    for i in range(8):
        for c in [c for c in (8, 16) if c in bar.open]:
            for arm in ("baseline", "candidate"):
                bar.tick(f"concurrency {{c}}, pair {{i + 1}}, {{arm}}")
                bar.step_done(1)
            bar.pair_done(c, decided=(c == 8 and i == 6))
"""


def test_progress_at_80_columns_in_a_log_is_never_cut():
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    said = done.stderr
    assert "…" not in said, said
    assert all(len(line) <= 80 for line in said.splitlines()), said
    # the elapsed time and ETA whole, on every bar
    assert len(re.findall(r"\d:\d\d:\d\d ETA (\d:\d\d:\d\d|-:--:--)", said)) == 2, said
    assert LONG in "".join(said.split())  # folded over lines, but every character there
    flat = " ".join(said.split())
    assert ("G3 pairs: 7 pairs per level at least, up to 84 (looks at 7, 14, 84), 2 levels, "
            "budget 75 min") in flat
    assert "concurrency 8 done after 7 pairs" in flat
    assert "concurrency 16 undecided at the look at 7 pairs, on to 14" in flat
    assert "G3 pairs to the look at 14:" in flat


def test_plan_text_says_the_least_the_most_and_the_budget():
    assert plan_text([7, 14, 84], 75 * 60, 2) == (
        "7 pairs per level at least, up to 84 (looks at 7, 14, 84), 2 levels, budget 75 min")
    assert plan_text([3], 600, 1).endswith("1 level, budget 10 min")


def test_the_bar_counts_the_runs_to_the_next_look_not_to_the_budget():
    bar = Progress(console=Console(file=io.StringIO()))
    look = LookProgress(bar, "G3 pairs", [7, 14, 84], [8, 16], runs_per_pair=2)
    assert look.next_look() == 7 and look.target() == 2 * 7 * 2  # 28 runs, not 2 * 84 * 2
    for _ in range(7):
        look.step_done(1), look.step_done(1), look.pair_done(8, decided=False)
        look.step_done(1), look.step_done(1), look.pair_done(16, decided=False)
    assert look.next_look() == 14 and look.target() == 28 + 2 * 7 * 2
    look.pair_done(8, decided=True)  # level 8 decided: only 16's runs remain to the look
    assert look.open == [16] and look.target() == 28 + 2 * 7
