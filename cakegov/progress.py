"""A progress bar for long runs (files done, rate, elapsed), on a terminal only.

Progress goes to standard error and only when standard error is a terminal: piped or
redirected output, CI logs and `--quiet` runs get nothing, so reports stay byte-stable.
`Bar` starts when its total is known (inside a stage, after the corpus is planned) and
may be advanced from worker threads: rich's Progress takes a lock per update."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Advance = Callable[[int], None]


def wanted(quiet: bool, total: int) -> bool:
    """Whether a run of `total` items shows a bar: more than one item, a TTY, not quiet."""
    return not quiet and total > 1 and sys.stderr.isatty()


class Bar:
    """A bar that draws nothing until `start`, and nothing at all when not wanted."""

    def __init__(self, *, quiet: bool = False, unit: str = "files"):
        self.quiet, self.unit = quiet, unit
        self._progress: Any = None
        self._task: Any = None

    def start(self, label: str, total: int) -> None:
        """Show `label` with `total` items to go (a second start replaces the first)."""
        self.stop()
        if not wanted(self.quiet, total):
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.text import Text

        unit = self.unit

        class RateColumn(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                return Text(f"{speed:.1f} {unit}/s" if speed else f"- {unit}/s")

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TextColumn(unit), RateColumn(),
                                  TimeElapsedColumn(), console=Console(stderr=True),
                                  transient=True)
        self._progress.start()
        self._task = self._progress.add_task(label, total=total)

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and n:
            self._progress.advance(self._task, n)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = self._task = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def progress(label: str, total: int, *, quiet: bool = False, unit: str = "files"
             ) -> Iterator[Advance]:
    """Yield `advance(n)`; when a bar is wanted it moves the bar by n items."""
    with Bar(quiet=quiet, unit=unit) as bar:
        bar.start(label, total)
        yield bar.advance
