"""The one owner of every job on a folder's index.

First index, rebuilds, batches of file events and compaction all run on the folder's single
writer thread, in the order they were asked for: one writer per index, and jobs that queue
instead of racing. Saved files are read ahead of their update, on a reader thread of the
folder (drafted by their words: a search finds them while the update waits behind a write).
The owner also holds what the jobs need between them (the running run, the events waiting for
a batch, the compaction clock) and every task and timer it started, so closing the folder — or
shutting the server down — cancels all of them in one place.

A cancelled task stops at once; the writer thread is never interrupted. The write under way
finishes its commit, and an indexing run stops at its next checkpoint between commits (its
``cancel`` event is set first), so the index is never left half-written and nothing more is
written to it. A task cancelled while it awaits the client (a progress token) gets no error
either: the late answer is dropped (``server/stdio.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from rag_lsp.errors import WorkspaceClosedError
from rag_lsp.priority import run_in_background
from rag_lsp.server.tasks import spawn

T = TypeVar("T")


def _writer_thread_starts() -> None:
    """Below the searches' priority, once LanceDB's worker threads exist: they start when it
    is imported and serve the searches too (started from here, they would inherit the
    lowered priority; the engine is imported by now in a server, not always in a test)."""
    import lancedb  # noqa: F401

    run_in_background()


class FolderJobs:
    def __init__(self) -> None:
        # Writes run below the searches' CPU priority (index runs, file updates, compaction).
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="rag-index",
                                          initializer=_writer_thread_starts)
        # Reads ahead of the writer (saved files drafted by their words), one at a time so
        # that a file's later draft is also the last one added.
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="rag-draft")
        self._tasks: set[asyncio.Task] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.closed = False
        # The indexing run under way, and how to stop it (checked between files).
        self.run: asyncio.Task | None = None
        self.cancel = threading.Event()
        self.rerun = False  # another (incremental) run was asked for during this one
        # The run is a full rebuild made beside the index, which keeps answering whole:
        # guessed when it is asked for, then what the engine says once it has decided.
        self.beside = False
        # File events waiting to be applied (folder-relative paths), coalesced.
        self.pending: set[str] = set()
        self.undrafted: set[str] = set()  # pending paths changed since they were drafted
        self.rescan = False  # an ignore file changed: the next batch rescans the folder
        self.update_failed = False  # the last update failed (not a run): one that works next
        # starts a run, to make the index whole again (a run that fails does not loop)
        self.first_pending_at = 0.0
        self.flushing = False
        # Updates since the last compaction, and when the oldest of them landed.
        self.updates_since_compact = 0
        self.first_uncompacted_at = 0.0

    @property
    def running(self) -> bool:
        return self.run is not None and not self.run.done()

    async def write(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``function`` on the writer thread, after every write queued before it.
        Raises :class:`WorkspaceClosedError` once the folder is closed."""
        if self.closed:
            raise WorkspaceClosedError("the folder was closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, partial(function, *args, **kwargs))

    async def read(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``function`` on the reader thread, beside the writer's work, after every read
        queued before it. Raises :class:`WorkspaceClosedError` once the folder is closed."""
        if self.closed:
            raise WorkspaceClosedError("the folder was closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader, partial(function, *args, **kwargs))

    def start(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """A task of this folder: held (and its error logged) until done, cancelled when the
        folder closes; never started once it has."""
        task = spawn(coroutine)
        if self.closed:
            task.cancel()
        else:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return task

    def after(self, name: str, delay: float, job: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Start ``job()`` in ``delay`` seconds, replacing the timer ``name`` if one is set."""
        self.cancel_timer(name)
        if self.closed:
            return

        def fire() -> None:
            self._timers.pop(name, None)
            self.start(job())

        self._timers[name] = asyncio.get_running_loop().call_later(delay, fire)

    def cancel_timer(self, name: str) -> None:
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    def has_timer(self, name: str) -> bool:
        return name in self._timers

    def close(self) -> None:
        """Stop everything: timers and tasks are cancelled, queued writes are dropped, the
        write under way finishes its commit and a run stops at its next checkpoint."""
        self.closed = True
        self.cancel.set()  # stops the writer's run: cancelling its task does not reach it
        for name in list(self._timers):
            self.cancel_timer(name)
        self.pending.clear()
        self.undrafted.clear()
        self._writer.shutdown(wait=False, cancel_futures=True)
        self._reader.shutdown(wait=False, cancel_futures=True)
        for task in list(self._tasks):
            task.cancel()

    async def stopped(self) -> None:
        """Wait until the write under way (if any) has finished: after :meth:`close`, nothing
        of this folder writes to its index any more."""
        await asyncio.get_running_loop().run_in_executor(None, self._writer.shutdown, True)
