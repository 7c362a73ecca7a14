"""Searches before indexing: on a small machine both compete for the same cores, and a user
waiting on a search matters more than an index finishing a little sooner."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# Indexing never waits longer than this for searches, so a stream of them cannot stall it.
MAX_WAIT_SECONDS = 2.0


class SearchFirst:
    """Shared by the searches and the indexing runs of one process."""

    def __init__(self) -> None:
        self._active = 0
        self._idle = threading.Condition()
        self._interrupts: list[Callable[[], None]] = []

    def on_search(self, interrupt: Callable[[], None]) -> None:
        """Call ``interrupt`` whenever a search starts (to stop background work at once)."""
        if interrupt not in self._interrupts:
            self._interrupts.append(interrupt)

    @contextmanager
    def searching(self) -> Iterator[None]:
        """Mark a search as running for the duration of the ``with`` block."""
        with self._idle:
            self._active += 1
        for interrupt in self._interrupts:
            interrupt()
        try:
            yield
        finally:
            with self._idle:
                self._active -= 1
                if self._active == 0:
                    self._idle.notify_all()

    def wait_turn(self) -> None:
        """Called by indexing between embedding batches: wait while searches run."""
        with self._idle:
            self._idle.wait_for(lambda: self._active == 0, timeout=MAX_WAIT_SECONDS)
