"""Indexing runs with progress, and ``rag/reindex``.

Runs and updates for a folder all go through its job owner (``server/jobs.py``): one writer
thread, and the tasks and timers it holds. File events become updates in ``file_events.py``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

from rag_lsp.errors import RagLspError
from rag_lsp.indexing.progress import IndexProgress
from rag_lsp.server.errors import bad_input, rag_request
from rag_lsp.server.folders import DEGRADED, ERROR, INDEXING, READY, FolderIndex, uri_to_path
from rag_lsp.server.methods import RAG_REINDEX
from rag_lsp.server.progress import WorkDone
from rag_lsp.server.protocol import parse_params

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState

log = logging.getLogger(__name__)


class IndexCancelled(Exception):
    """Raised from the progress callback to stop an indexing run between files."""


class IndexingService:
    def __init__(self, server: ServerState):
        self.server = server

    # ---- runs --------------------------------------------------------------------------

    def start_run(self, folder: FolderIndex, *, full: bool = False) -> bool:
        """Start an indexing run on ``folder`` (or queue one if a run is under way).
        False when the folder cannot be indexed (no model)."""
        if folder.closed:
            return False
        if folder.workspace.degraded:
            self.server.set_folder_state(folder, DEGRADED, self.server.degraded_message())
            return False
        jobs = folder.jobs
        if jobs.running:
            if not full:
                jobs.rerun = True
                return True
            jobs.cancel.set()  # a full rebuild replaces the current run
        previous = jobs.run
        jobs.beside = full and folder.workspace.has_index()
        jobs.run = jobs.start(self._run(folder, full, previous))
        return True

    async def _run(self, folder: FolderIndex, full: bool, previous: asyncio.Task | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        if folder.closed:
            return  # closed while this run waited its turn: nothing to do, nothing to report
        jobs = folder.jobs
        jobs.cancel = cancel = threading.Event()
        jobs.rerun = False
        self.server.set_folder_state(folder, INDEXING, "scanning files")
        work = WorkDone(self.server, f"rag-lsp: indexing {folder.name}", cancel)
        await work.begin("scanning files")
        loop = asyncio.get_running_loop()

        def on_progress(progress: IndexProgress) -> None:
            if cancel.is_set():
                raise IndexCancelled
            loop.call_soon_threadsafe(self._on_progress, folder, work, progress)

        state, message = READY, ""
        try:
            report = await jobs.write(folder.workspace.index, full=full, progress=on_progress)
            jobs.update_failed = False  # this run took up whatever a failed update dropped
            message = report.summary()
            folder.mark_updated()
            log.info("%s: %s", folder.name, message)
        except IndexCancelled:
            message = "indexing was cancelled; searches use what was indexed so far"
            log.info("%s: %s", folder.name, message)
        except asyncio.CancelledError:  # the folder closed: the writer stops between commits
            message = "indexing stopped: the folder was closed"
            log.info("%s: %s", folder.name, message)
            raise
        except Exception as exc:  # contained: the server keeps serving
            if folder.closed:
                # Closed under the run (its writer retired, or it was waiting for another
                # process's lock): the user's doing, not a failure to report.
                message = "indexing stopped: the folder was closed"
                log.info("%s: %s (%s)", folder.name, message, exc)
            elif isinstance(exc, RagLspError):
                state, message = ERROR, str(exc)
                self.server.show_error(f"rag-lsp could not index {folder.root}: {exc}")
            else:
                log.exception("indexing %s failed", folder.root)
                state, message = ERROR, f"indexing failed: {exc}"
                self.server.show_error(f"rag-lsp: indexing {folder.root} failed: {exc}")
        finally:
            work.end(message or "done")
            folder.percentage = None
            jobs.beside = False
        if folder.closed:
            return
        await self.refresh_counts(folder)
        self.server.set_folder_state(folder, state, message)
        if state == READY:
            jobs.start(self._warm_up(folder))
        if jobs.rerun and state == READY:
            loop.call_soon(self.start_run, folder)
        elif jobs.pending or jobs.rescan:
            self.server.file_events.schedule_flush(folder, delay=0)

    def _on_progress(self, folder: FolderIndex, work: WorkDone, progress: IndexProgress) -> None:
        if progress.phase != "wait":  # the engine has decided how to run it
            folder.jobs.beside = folder.workspace.rebuilding_beside
        folder.percentage = progress.percentage()
        folder.message = progress.describe()
        if work.report(progress):  # throttled: status at the pace of $/progress
            self.server.send_index_status()

    async def _warm_up(self, folder: FolderIndex) -> None:
        """A first search after start-up or a run should not wait for the query session or
        for the index's in-memory copy (~230 ms against ~15 at 12k chunks)."""
        await asyncio.get_running_loop().run_in_executor(
            self.server.search_pool, folder.workspace.warm_up)

    async def refresh_counts(self, folder: FolderIndex) -> None:
        try:
            status = await asyncio.get_running_loop().run_in_executor(
                self.server.search_pool, folder.workspace.status
            )
        except RagLspError as exc:
            log.warning("%s: cannot read index status: %s", folder.name, exc)
            return
        folder.files, folder.chunks = status.files, status.chunks
        folder.last_update = status.last_indexed_at or folder.last_update


def register(server: ServerState) -> None:
    @rag_request(server, RAG_REINDEX)
    async def reindex(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_REINDEX, params)
        ls.require_enabled()
        folders = list(ls.folders.values())
        if "folder" in args:
            wanted = uri_to_path(args["folder"])
            folders = [f for f in folders if wanted is not None and f.own_path(wanted) == f.root]
            if not folders:
                open_ = ", ".join(ls.folders) or "none"
                raise bad_input(
                    f"$.folder = {args['folder']!r}: not an open workspace folder "
                    f"(open: {open_})"
                )
        started = [f.uri for f in folders
                   if ls.indexing.start_run(f, full=bool(args.get("full", False)))]
        return {"started": started}
