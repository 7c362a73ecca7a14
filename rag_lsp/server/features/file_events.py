"""File events into index updates: drafted by their words at once, applied in batches.

Events are coalesced: each one restarts a short quiet timer, bounded so a steady stream still
flushes, and everything pending goes to the engine as one update on the folder's writer
thread (``server/jobs.py``; a branch switch touching 1,000 files is one update, not 1,000).
Before that, the files changed since the last flush are drafted by their words on the
folder's reader thread (``Workspace.draft_saved``), so a search finds them while the update
waits behind a compaction or a run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rag_lsp.config import CONFIG_FILE_NAME
from rag_lsp.errors import RagLspError
from rag_lsp.server.features.compaction import schedule_compact
from rag_lsp.server.folders import ERROR, FolderIndex
from rag_lsp.server.tasks import spawn

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState

log = logging.getLogger(__name__)

QUIET_SECONDS = 0.03  # an event burst is over once it has been quiet this long…
MAX_DELAY_SECONDS = 0.25  # …but pending events never wait longer than this


class FileEventBatches:
    def __init__(self, server: ServerState):
        self.server = server

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
            if rel is not None and folder.rules.in_index_folder(rel):
                if not (jobs.rescan or folder.workspace.index_dir.exists()):
                    # Deleted under the server (`git clean -xdf`): every search would come
                    # back empty, and the next update would make an index of its files alone.
                    log.warning("%s: the index folder %s was deleted; indexing the folder "
                                "again", folder.name, folder.workspace.index_dir)
                    jobs.rescan = added = True
                continue
            if rel is None or not folder.rules.may_matter(rel):
                continue
            if folder.rules.is_rule_file(rel):
                folder.rules.forget(rel)
                jobs.rescan = True
            jobs.pending.add(rel)
            jobs.undrafted.add(rel)
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
        """Draft the files changed since the last flush, then apply every pending event as
        one engine update (or one rescan)."""
        jobs = folder.jobs
        if folder.closed:
            return
        await self._draft_saved(folder)
        if folder.closed or jobs.running or jobs.flushing:
            return  # the run's end, or the running flush, picks the events up
        if jobs.rescan:  # ignore rules changed: the scan decides again
            jobs.rescan = False
            # (What is pending stays: it is drafted, and its update after the run ends that.)
            self.server.indexing.start_run(folder)
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
            jobs.update_failed = True
            report = None
        except Exception as exc:
            log.exception("%s: updating %d files failed", folder.name, len(paths))
            jobs.update_failed = True  # (its paths are dropped: a run takes them up)
            if not folder.closed:  # said where its state shows, not only in the log
                why = (str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}; "
                       "this is a bug in rag-lsp, the server log has the details")
                self.server.set_folder_state(
                    folder, ERROR, f"applying {len(paths)} changed files failed ({why})")
            report = None
        finally:
            jobs.flushing = False
        if report is not None and jobs.update_failed:  # the error is past (a folder back):
            jobs.update_failed = False  # a run makes the index whole again
            self.server.indexing.start_run(folder)
        if report is not None and (report.files_indexed or report.files_removed):
            log.info("%s: %d changed files applied (%d indexed, %d removed, %d chunks "
                     "embedded) in %.0f ms", folder.name, len(paths), report.files_indexed,
                     report.files_removed, report.chunks_embedded, report.seconds * 1000)
            folder.mark_updated()
            jobs.updates_since_compact += 1
            schedule_compact(folder)
            await self.server.indexing.refresh_counts(folder)
            self.server.send_index_status()
        if jobs.pending or jobs.rescan:
            self.schedule_flush(folder, delay=0)

    async def _draft_saved(self, folder: FolderIndex) -> None:
        """Make the files changed since the last flush searchable by their words now: their
        update may wait behind a write under way (a compaction that trains the ANN index
        again took 27-38 s at 100k chunks)."""
        jobs = folder.jobs
        paths, jobs.undrafted = sorted(jobs.undrafted), set()
        if not paths or not folder.workspace.drafts_saved_files():
            return
        drafted = paths  # (if drafting fails part-way: any of them may be)
        try:
            drafted = await jobs.read(folder.workspace.draft_saved, paths)
        except Exception as exc:  # a head start only: the update follows regardless
            if not folder.closed:
                log.warning("%s: could not draft %d changed files: %s", folder.name,
                            len(paths), exc)
        finally:
            # An update that took a path while it was drafted may have read the file before
            # the draft did: the next update reads it again, and ends its draft (a flush or a
            # run under way flushes what is pending when it ends).
            if not folder.closed:
                jobs.pending.update(drafted)
