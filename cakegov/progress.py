"""A progress bar for long runs (files done, rate, elapsed), on a terminal only.

Progress goes to standard error and only when standard error is a terminal: piped or
redirected output, CI logs and `--quiet` runs get nothing, so reports stay byte-stable."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Advance = Callable[[int], None]


def wanted(quiet: bool, total: int) -> bool:
    """Whether a run of `total` items shows a bar: more than one item, a TTY, not quiet."""
    return not quiet and total > 1 and sys.stderr.isatty()


@contextmanager
def progress(label: str, total: int, *, quiet: bool = False, unit: str = "files"
             ) -> Iterator[Advance]:
    """Yield `advance(n)`; when a bar is wanted it moves the bar by n items."""
    if not wanted(quiet, total):
        yield lambda n=1: None
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

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:.1f} {unit}/s" if speed else f"- {unit}/s")

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn(unit), RateColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    with bar:
        task = bar.add_task(label, total=total)
        yield lambda n=1: bar.advance(task, n)
