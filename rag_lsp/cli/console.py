"""Terminal output: progress bars and spinners on stderr, so stdout stays for results."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from rag_lsp.indexing.progress import IndexProgress

if TYPE_CHECKING:
    from rich.console import Console


@cache
def stderr_console() -> Console:
    """The console on stderr, made on first use: rich takes ~40 ms to import, which
    `rag-lsp serve` (and so its answer to `initialize`) need not pay."""
    from rich.console import Console

    # soft_wrap: never break an error message mid-line (users grep and paste them). No markup
    # or emoji codes: messages quote the user's own text (`app/[id]/page.tsx`, `:smile:`),
    # which must print as typed; styles go through print_styled.
    return Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


def print_styled(label: str, style: str, message: str = "") -> None:
    """``label`` in ``style``, then ``message`` as plain text, on stderr."""
    from rich.text import Text

    text = Text(label, style=style)
    if message:
        text.append(" " + message)
    stderr_console().print(text)


def print_dim(message: str) -> None:
    stderr_console().print(message, style="dim")


class _StderrConsole:
    """``err.print(...)`` and the rest, on :func:`stderr_console`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(stderr_console(), name)


err = _StderrConsole()


@contextlib.contextmanager
def delayed_spinner(message: str, delay: float = 0.5) -> Iterator[None]:
    """A spinner that appears only if the work takes longer than ``delay`` seconds."""
    status = err.status(message)
    timer = threading.Timer(delay, status.start)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        status.stop()


# Off a terminal (a pipe, a CI log, `make demo`'s output) the bar cannot redraw itself: a
# line is printed instead when the phase changes and then at most this often, so a run of
# minutes shows it is alive without flooding a log.
PLAIN_LINE_SECONDS = 30.0
_PHASE_NAMES = {"scan": "scanning", "draft": "reading", "index": "indexing",
                "finish": "finishing"}


class IndexProgressBar:
    """Renders :class:`IndexProgress` callbacks as one bar: the run's share done (by the work
    its files need, see :meth:`IndexProgress.percentage`), then what it has done so far. On
    a stderr that is not a terminal, plain lines instead (see :data:`PLAIN_LINE_SECONDS`)."""

    def __init__(self, enabled: bool = True, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        console = stderr_console()
        self._plain = enabled and not console.is_terminal
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not enabled or self._plain,
        )
        self._task = self._progress.add_task("scanning", total=None, detail="")
        self._waited = False
        self._clock = clock
        self._started = clock()
        self._last_line: tuple[str, float] | None = None  # (phase, when) of the last line

    def __enter__(self) -> IndexProgressBar:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def __call__(self, event: IndexProgress) -> None:
        if event.phase == "wait":  # another process is writing this index: say so, once
            if not self._waited:
                self._waited = True
                err.print(f"rag-lsp: {event.message}…")
            return
        detail = event.describe() if event.phase == "index" else event.note
        if self._plain:
            self._print_line(event, detail)
            return
        self._progress.update(
            self._task,
            description=_PHASE_NAMES.get(event.phase, event.phase),
            completed=event.percentage(),
            total=100 if event.phase in ("index", "finish") else None,
            detail=detail,
        )

    def _print_line(self, event: IndexProgress, detail: str) -> None:
        now = self._clock()
        if self._last_line is not None:
            phase, when = self._last_line
            if phase == event.phase and now - when < PLAIN_LINE_SECONDS:
                return
        self._last_line = (event.phase, now)
        share = f" {event.percentage()}%" if event.phase == "index" else ""
        elapsed = int(now - self._started)
        text = f"rag-lsp: {_PHASE_NAMES.get(event.phase, event.phase)}{share}"
        if detail:
            text += f": {detail}"
        err.print(f"{text} ({elapsed // 60}:{elapsed % 60:02d})")
