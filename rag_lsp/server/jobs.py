"""The one owner of every job on a folder's index.

First index, rebuilds, batches of file events and compaction all run on the folder's single
writer thread, in the order they were asked for: one writer per index, and jobs that queue
instead of racing. The owner also holds what the jobs need between them (the running run,
the events waiting for a batch, the compaction clock) and every task and timer it started, so
closing the folder — or shutting the server down — stops all of them in one place.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from rag_lsp.errors import WorkspaceClosedError
from rag_lsp.server.tasks import spawn

T = TypeVar("T")


class FolderJobs:
    def __init__(self) -> None:
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="rag-index")
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
        self.rescan = False  # an ignore file changed: the next batch rescans the folder
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

    def start(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """A task of this folder: held until done; never started once the folder closed."""
        task = spawn(coroutine)  # held (and its errors logged) until done
        if self.closed:
            task.cancel()
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
        """Stop everything: the run stops at its next file, timers are cancelled, queued
        writes are dropped (the one under way finishes its batch), tasks end at their next
        step."""
        self.closed = True
        self.cancel.set()
        for name in list(self._timers):
            self.cancel_timer(name)
        # Tasks are not cancelled from outside: one may be awaiting the client (a progress
        # token), and cancelling that request makes pygls report an error to the user. Each
        # task checks ``closed`` between its steps, and its queued writes are dropped here.
        self.pending.clear()
        self._writer.shutdown(wait=False, cancel_futures=True)

    async def stopped(self) -> None:
        """Wait until the write under way (if any) has finished: after :meth:`close`, nothing
        of this folder writes to its index any more."""
        await asyncio.get_running_loop().run_in_executor(None, self._writer.shutdown, True)
