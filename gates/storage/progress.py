"""Progress bars with ETA for long work (fio jobs, soaks), drawn by rich on stderr."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


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


@contextmanager
def step_progress(title: str, total_seconds: float) -> Iterator[StepProgress]:
    """A progress bar with elapsed time and ETA on the real stderr (outside pytest's capture)."""
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                   TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(),
                   console=Console(file=sys.__stderr__), transient=False)
    with bar:
        yield StepProgress(bar, title, total_seconds)
