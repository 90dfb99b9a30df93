"""Progress bars with ETA for long work (fio jobs, soaks, G3's pairs), drawn by rich on stderr.

Readable at any width and in a log file: the description column wraps (at words, a long path
folded) while the percentage, elapsed time and ETA keep their whole width, so an 80-column
terminal or a pipe (rich then draws the bar once, at the end) never shows "0:00:… ETA 0:00:…".
Lines said through a bar (say) are printed whole above it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column


def _bar() -> Progress:
    whole = dict(no_wrap=True)
    return Progress(
        TextColumn("[bold]{task.description}", table_column=Column(ratio=1, overflow="fold")),
        BarColumn(bar_width=16, table_column=Column(**whole)),
        TextColumn("{task.percentage:>3.0f}%", table_column=Column(min_width=4, **whole)),
        TimeElapsedColumn(table_column=Column(min_width=7, **whole)),
        TextColumn("ETA", table_column=Column(**whole)),
        TimeRemainingColumn(table_column=Column(min_width=7, **whole)),
        console=Console(file=sys.__stderr__), transient=False, expand=True)


class StepProgress:
    """One bar over a sequence of steps whose durations are estimated up front."""

    def __init__(self, bar: Progress, title: str, total_seconds: float):
        self.bar, self.title = bar, title
        self.task = bar.add_task(title, total=max(total_seconds, 1e-9))
        self.finished_seconds = 0.0

    def tick(self, label: str, elapsed: float, estimate: float) -> None:
        """Show the current step and how far into it we are."""
        self.bar.update(self.task, description=f"{self.title}: {label}",
                        completed=self.finished_seconds + min(elapsed, estimate))

    def step_done(self, estimate: float) -> None:
        """Count a finished step at its estimated length."""
        self.finished_seconds += estimate
        self.bar.update(self.task, completed=self.finished_seconds)

    def say(self, line: str) -> None:
        """Print a whole line above the bar (wrapped at words, never cut)."""
        self.bar.console.print(line, highlight=False, markup=False)


@contextmanager
def step_progress(title: str, total_seconds: float) -> Iterator[StepProgress]:
    """A progress bar with elapsed time and ETA on the real stderr (outside pytest's capture)."""
    bar = _bar()
    with bar:
        yield StepProgress(bar, title, total_seconds)


def plan_text(looks: Sequence[int], budget_s: float, levels: int) -> str:
    """A sequential plan in words: "7 pairs per level at least, up to 84 (looks at 7, 14, 84),
    2 levels, budget 75 min"."""
    return (f"{looks[0]} pairs per level at least, up to {looks[-1]} (looks at "
            f"{', '.join(map(str, looks))}), {levels} level{'s' * (levels != 1)}, budget "
            f"{budget_s / 60:.0f} min")


class LookProgress(StepProgress):
    """A bar over the runs up to the plan's next look, so its ETA is that look's, not the
    budget's: a plan that stops at its first look says so, and each look is said as a line."""

    def __init__(self, bar: Progress, title: str, looks: Sequence[int], levels: Sequence[int],
                 runs_per_pair: int):
        self.looks, self.per_pair = list(looks), runs_per_pair
        self.pairs, self.open = {c: 0 for c in levels}, list(levels)
        self.finished_seconds = 0.0  # here: runs done
        super().__init__(bar, title, self.target())

    def next_look(self) -> int:
        """The next look any open level has not reached (the last look when all did)."""
        least = min((self.pairs[c] for c in self.open), default=self.looks[-1])
        return next((n for n in self.looks if n > least), self.looks[-1])

    def target(self) -> float:
        """Runs done, plus those the open levels need to reach the next look."""
        look = self.next_look()
        return self.finished_seconds + self.per_pair * sum(
            max(look - self.pairs[c], 0) for c in self.open)

    def tick(self, label: str, elapsed: float = 0.0, estimate: float = 1.0) -> None:
        """Show the current run, under the look it leads to."""
        self.bar.update(self.task, description=f"{self.title} to the look at "
                        f"{self.next_look()}: {label}", total=max(self.target(), 1e-9))

    def pair_done(self, level: int, decided: bool) -> None:
        """Count a pair; at a look, say what it decided and retarget the bar."""
        self.pairs[level] += 1
        n = self.pairs[level]
        if decided and level in self.open:
            self.open.remove(level)
            self.say(f"{self.title}: concurrency {level} done after {n} pairs")
        elif n in self.looks:
            self.say(f"{self.title}: concurrency {level} undecided at the look at {n} pairs, "
                     f"on to {self.next_look()}")
        self.bar.update(self.task, total=max(self.target(), 1e-9))


@contextmanager
def look_progress(title: str, looks: Sequence[int], levels: Sequence[int], budget_s: float,
                  runs_per_pair: int = 2) -> Iterator[LookProgress]:
    """A LookProgress whose first line states the plan (plan_text)."""
    bar = _bar()
    with bar:
        progress = LookProgress(bar, title, looks, levels, runs_per_pair)
        progress.say(f"{title}: {plan_text(looks, budget_s, len(levels))}")
        yield progress
