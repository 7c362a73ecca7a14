"""Indexing runs with progress, updates from file events, and ``rag/reindex``.

Runs and updates for a folder all go through its job owner (``server/jobs.py``): one writer
thread, and the tasks and timers it holds. File events are coalesced: each one restarts a
short quiet timer, bounded so a steady stream still flushes, and everything pending goes to
the engine as one batch (a branch switch touching 1,000 files is one update, not 1,000).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from rag_lsp.config import CONFIG_FILE_NAME
from rag_lsp.errors import RagLspError
from rag_lsp.indexing.progress import IndexProgress
from rag_lsp.server.errors import bad_input, rag_request
from rag_lsp.server.features.compaction import schedule_compact
from rag_lsp.server.folders import DEGRADED, ERROR, INDEXING, READY, FolderIndex, uri_to_path
from rag_lsp.server.methods import RAG_REINDEX
from rag_lsp.server.progress import WorkDone
from rag_lsp.server.protocol import parse_params
from rag_lsp.server.tasks import spawn

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState

log = logging.getLogger(__name__)

QUIET_SECONDS = 0.03  # an event burst is over once it has been quiet this long…
MAX_DELAY_SECONDS = 0.25  # …but pending events never wait longer than this


class IndexCancelled(Exception):
    """Raised from the progress callback to stop an indexing run between files."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
            message = report.summary()
            folder.last_update = _now()
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
            self.schedule_flush(folder, delay=0)

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

    # ---- file events -------------------------------------------------------------------

    def queue_paths(self, folder: FolderIndex, paths: Iterable[str]) -> None:
        """Note changed paths (absolute, or relative to the folder); apply them shortly."""
        if folder.closed or folder.workspace.degraded:
            return
        jobs = folder.jobs
        added = False
        for path in paths:
            rel = folder.rules.relative(path)
            if rel == CONFIG_FILE_NAME:
                spawn(self.server.registry.reopen(folder.uri))  # outlives the folder
                return
            if rel is None or not folder.rules.may_matter(rel):
                continue
            if folder.rules.is_rule_file(rel):
                folder.rules.forget(rel)
                jobs.rescan = True
            jobs.pending.add(rel)
            added = True
        if added:
            self.schedule_flush(folder)

    def schedule_flush(self, folder: FolderIndex, delay: float | None = None) -> None:
        jobs = folder.jobs
        now = asyncio.get_running_loop().time()
        if not jobs.first_pending_at:
            jobs.first_pending_at = now
        if delay is None:
            delay = min(QUIET_SECONDS, max(0.0, jobs.first_pending_at + MAX_DELAY_SECONDS - now))
        jobs.after("flush", delay, lambda: self.flush(folder))

    async def flush(self, folder: FolderIndex) -> None:
        """Apply every pending event as one engine update (or one rescan)."""
        jobs = folder.jobs
        if folder.closed or jobs.running or jobs.flushing:
            return  # the run's end, or the running flush, picks the events up
        if jobs.rescan:
            jobs.rescan = False
            jobs.pending.clear()
            jobs.first_pending_at = 0.0
            self.start_run(folder)  # ignore rules changed: the scan decides again
            return
        paths, jobs.pending = sorted(jobs.pending), set()
        jobs.first_pending_at = 0.0
        if not paths:
            return
        jobs.flushing = True
        try:
            report = await jobs.write(folder.workspace.update, paths)
        except RagLspError as exc:
            if folder.closed:
                return  # closed while it waited for another process's write
            log.warning("%s: could not apply %d changed files: %s", folder.name, len(paths), exc)
            self.server.set_folder_state(folder, ERROR, str(exc))
            return
        except Exception:
            log.exception("%s: updating %d files failed", folder.name, len(paths))
            return
        finally:
            jobs.flushing = False
        if report.files_indexed or report.files_removed:
            log.info("%s: %d changed files applied (%d indexed, %d removed, %d chunks "
                     "embedded) in %.0f ms", folder.name, len(paths), report.files_indexed,
                     report.files_removed, report.chunks_embedded, report.seconds * 1000)
            folder.last_update = _now()
            jobs.updates_since_compact += 1
            schedule_compact(folder)
            await self.refresh_counts(folder)
            self.server.send_index_status()
        if jobs.pending or jobs.rescan:
            self.schedule_flush(folder, delay=0)


def register(server: ServerState) -> None:
    @rag_request(server, RAG_REINDEX)
    async def reindex(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_REINDEX, params)
        ls.require_enabled()
        folders = list(ls.folders.values())
        if "folder" in args:
            wanted = uri_to_path(args["folder"])
            folders = [f for f in folders if f.root == wanted]
            if not folders:
                open_ = ", ".join(ls.folders) or "none"
                raise bad_input(
                    f"$.folder = {args['folder']!r}: not an open workspace folder "
                    f"(open: {open_})"
                )
        started = [f.uri for f in folders
                   if ls.indexing.start_run(f, full=bool(args.get("full", False)))]
        return {"started": started}
