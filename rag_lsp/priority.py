"""Searches before indexing: on a small machine both compete for the same cores, and a user
waiting on a search matters more than an index finishing a little sooner."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

# Indexing never waits longer than this for searches, and after such a wait goes on for as
# long again without waiting: a stream of searches slows it down by half at most, however
# often it asks (before each file and each chunk).
MAX_WAIT_SECONDS = 2.0
# How much lower the CPU priority of background threads (indexing, loading the in-memory
# copy) is than the rest of the process: when the cores are busy, searches and the editor's
# own processes go first; when they are not, it changes nothing.
BACKGROUND_NICENESS = 10


def background_niceness() -> int:
    """The nice value of background work: ``BACKGROUND_NICENESS`` below the process's main
    thread (Linux's niceness is per thread; this is the process's own, whichever thread
    asks)."""
    return min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + BACKGROUND_NICENESS)


def run_in_background(niceness: int | None = None) -> None:
    """Lower the calling thread's CPU priority to ``niceness`` (default:
    :func:`background_niceness`). Linux gives each thread its own nice value (and threads
    it starts inherit it); elsewhere the call would lower the whole process, so it does
    nothing. A thread can only lower its own priority: call it first thing in a thread
    that does nothing but background work, and that starts no thread pool a search will
    use. Native libraries start their worker threads on first use, and those inherit the
    priority of the thread that starts them: LanceDB's start when it is imported, so import
    it before (the query's model session is made by a search or the warm-up, on the search
    threads). A child process started from a lowered thread starts lowered too."""
    if not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        target = background_niceness() if niceness is None else niceness
        if os.getpriority(os.PRIO_PROCESS, thread) < target:
            os.setpriority(os.PRIO_PROCESS, thread, target)
    except OSError as exc:  # a sandbox may refuse; the work runs all the same
        log.debug("could not lower a background thread's priority: %s", exc)


def lower_this_child_process(niceness: int) -> None:
    """In a child process that does only background work (the model's bulk calls, the ANN
    index's retraining), first thing, before a library starts a thread: the whole process at
    ``niceness``. On Linux that is its main thread, whose threads inherit it; elsewhere a
    process has one nice value."""
    run_in_background(niceness)
    if not sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        except OSError:
            pass


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
