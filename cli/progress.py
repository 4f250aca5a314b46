"""Progress on a terminal for the long one-shot commands (``load``, ``lab build``), drawn by Rich.

Drawn on stderr and only when both stdout and stderr are terminals: a pipe or a file
gets the plain lines (and ``load`` its summary on stdout) without cursor movement.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any


def on_terminal() -> bool:
    """True when a progress display makes sense (a person watches stdout and stderr)."""
    return sys.stdout.isatty() and sys.stderr.isatty()


class LoadProgress:
    """A Rich progress bar fed with the loader's samples (``on_progress``)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("loading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}"),
            console=Console(stderr=True), transient=False,
        )
        self._task: Any = None
        self._progress.start()

    def show(self, sample: Any) -> None:
        """Redraw from one LoaderSample."""
        from crdscope.tui.format import age

        done = sample.established + sample.skipped + sample.failed
        total = sample.requested if sample.source_read and sample.requested else None
        parts = [f"Established {sample.established}", f"{sample.crds_per_second:.1f}/s"]
        if sample.failed:
            parts.append(f"failed {sample.failed}")
        if sample.skipped:
            parts.append(f"skipped {sample.skipped}")
        if sample.eta_seconds is not None and sample.state == "running":
            parts.append(f"about {age(sample.eta_seconds)} left")
        if sample.state not in ("running", "done"):
            parts.append(sample.state)
        detail = " · ".join(parts)
        if self._task is None:
            self._task = self._progress.add_task("load", total=total, detail=detail)
        self._progress.update(self._task, completed=done, total=total, detail=detail)

    def close(self) -> None:
        """Leave the last state on screen and give the terminal back."""
        self._progress.stop()


@contextlib.contextmanager
def progress_lines(title: str) -> Iterator[Callable[[str], None]]:
    """A ``say(line)`` for a long step of unknown length: on a terminal a spinner with the elapsed
    time and the latest line (each line is also kept above it); elsewhere plain lines on stderr."""
    if not on_terminal():
        yield lambda line: print(line, file=sys.stderr, flush=True)
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn(title), TimeElapsedColumn(), TextColumn("{task.fields[line]}"),
                  console=console, transient=True) as progress:
        task = progress.add_task(title, total=None, line="")

        def say(line: str) -> None:
            progress.console.print(line, markup=False, highlight=False)
            progress.update(task, line=line[:60])

        yield say
