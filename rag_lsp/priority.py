"""Searches before indexing: on a small machine both compete for the same cores, and a user
waiting on a search matters more than an index finishing a little sooner."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# Indexing never waits longer than this for searches, and after such a wait goes on for as
# long again without waiting: a stream of searches slows it down by half at most, however
# often it asks (before each file and each chunk).
MAX_WAIT_SECONDS = 2.0


class SearchFirst:
    """Shared by the searches and the indexing runs of one process."""

    def __init__(self) -> None:
        self._active = 0
        self._idle = threading.Condition()
        self._interrupts: list[Callable[[], None]] = []
        self._go_on_until = 0.0  # after a wait that timed out: no more waiting until then

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
        """Called by indexing between pieces of its work: wait while searches run."""
        with self._idle:
            if self._active == 0 or time.monotonic() < self._go_on_until:
                return
            if not self._idle.wait_for(lambda: self._active == 0, timeout=MAX_WAIT_SECONDS):
                self._go_on_until = time.monotonic() + MAX_WAIT_SECONDS
