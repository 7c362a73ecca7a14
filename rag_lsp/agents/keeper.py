"""Keeping one workspace's index current for a long-running process that is not the language
server (the MCP server): open it in the background, bring the index up to date, then follow
file changes.

One thread does every write of this process, so its writes never overlap. Across processes
the index's writer lock decides (:mod:`rag_lsp.store.writer_lock`): when a language server or
``rag-lsp index`` is writing, this keeper waits its turn and searches read what is there —
the index is shared, never copied. Searches run on the caller's threads meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lsp.config import CONFIG_FILE_NAME, Settings
from rag_lsp.errors import RagLspError
from rag_lsp.indexing.progress import IndexProgress, IndexReport
from rag_lsp.indexing.watch import FolderWatcher
from rag_lsp.memory import freeze_long_lived_objects

if TYPE_CHECKING:
    from rag_lsp.indexing.scan import WorkspaceFilter
    from rag_lsp.workspace import Workspace

log = logging.getLogger(__name__)

# Changed files are applied once events have been quiet this long (an editor's save, a git
# checkout), but never later than MAX_DELAY after the first.
QUIET_SECONDS = 0.1
MAX_DELAY_SECONDS = 1.0
# Ask for a compaction once updates have settled this long (the workspace compacts if due).
COMPACT_AFTER_SECONDS = 20.0

STARTING, INDEXING, WAITING, READY, DEGRADED, FAILED = (
    "starting", "indexing", "waiting for another writer", "ready", "degraded", "failed")


class Stopped(Exception):
    """Raised from progress callbacks to end an indexing run when the keeper closes."""


@dataclass
class KeeperStatus:
    phase: str
    message: str
    progress: IndexProgress | None
    last_report: IndexReport | None
    last_change: float | None  # time.time() of the last write this process made

    @property
    def building(self) -> bool:
        """True while the index may still be missing files (first run, or catching up)."""
        return self.phase in (STARTING, INDEXING, WAITING)


class WorkspaceKeeper:
    """Owns one workspace folder for this process. :meth:`start` returns at once; callers
    wait for the workspace with :meth:`workspace` (the model loads in about a second)."""

    def __init__(self, root: Path, settings: Settings | None = None, *, watch: bool = True):
        self.root = root
        self._settings = settings
        self._watch = watch
        self._opened = threading.Event()
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._pending: set[str] = set()
        self._rescan = self._reopen = False
        self._workspace: Workspace | None = None
        self._open_error: RagLspError | None = None
        self._thread: threading.Thread | None = None
        self._watcher: FolderWatcher | None = None
        self._status = KeeperStatus(STARTING, "loading the model", None, None, None)
        self.had_index = False  # whether the index existed when the workspace opened

    # ---- for callers -------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rag-keeper", daemon=True)
            self._thread.start()

    def workspace(self, timeout: float = 120.0) -> Workspace:
        """The open workspace, once the model has loaded; raises what stopped it opening."""
        self.start()
        if not self._opened.wait(timeout):
            raise RagLspError(f"the workspace {self.root} is still opening after {timeout:.0f} "
                              "s (loading the model); try again shortly")
        if self._open_error is not None:
            raise self._open_error
        assert self._workspace is not None
        return self._workspace

    @property
    def opened(self) -> bool:
        """True once opening finished (or failed): :meth:`workspace` no longer waits."""
        return self._opened.is_set()

    def status(self) -> KeeperStatus:
        return self._status

    def wait_searchable(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until the index has something to search: the new
        files drafted by their words (all of them: the draft is complete), the first batch
        of a first run written, or the run over. True if it has."""
        ws = self.workspace()
        deadline = time.monotonic() + timeout
        while True:
            status = self._status
            drafted = (ws.drafted_files() > 0 and not (
                status.progress is not None and status.progress.phase == "draft"))
            if not status.building or (ws.has_index() and (
                    drafted or ws.status().chunks > 0)):
                return ws.has_index()
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def close(self, timeout: float = 2.0) -> None:
        """Stop watching and writing: a run under way stops at its next batch."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._watcher is not None:
            self._watcher.stop()
        if self._workspace is not None:
            self._workspace.close()
        if self._thread is not None:
            self._thread.join(timeout)
            embedder = self._workspace.embedder if self._workspace is not None else None
            if self._thread.is_alive() and embedder is not None:
                embedder.shut_down()  # a stopped or stuck model child holds the batch
                self._thread.join(timeout)

    @property
    def still_working(self) -> bool:
        """Whether the keeper's thread is still in a batch after :meth:`close` gave up
        waiting (a model call or a write under way)."""
        return self._thread is not None and self._thread.is_alive()

    # ---- the keeper's thread ------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._open()
        except RagLspError as exc:
            self._open_error = exc
            self._set(FAILED, str(exc))
            return
        except Exception as exc:  # contained: the MCP server keeps answering with the reason
            log.exception("opening %s failed", self.root)
            self._open_error = RagLspError(f"opening {self.root} failed: {exc}")
            self._set(FAILED, str(self._open_error))
            return
        finally:
            ws = self._workspace
            if ws is not None and ws.degraded:
                self._set(DEGRADED, f"lexical search of the existing index only: "
                                    f"{ws.model_error}")
            elif ws is not None:
                self._set(INDEXING, "scanning files")
            self._opened.set()
        if ws is None or ws.degraded:
            return
        if self._watch:
            self._watcher = FolderWatcher(self.root, self._on_paths)
            self._watcher.start()  # before the run: changes made during it are not missed
        self._index()
        if self._stop.is_set():
            return
        ws.warm_up()  # an agent's first search should not wait for the query session
        freeze_long_lived_objects()  # the model, the index, every import: here to stay
        self._follow_changes()

    def _open(self) -> None:
        from rag_lsp.workspace import Workspace  # seconds of imports: off the caller's thread

        old = self._workspace
        self._workspace = Workspace.open(
            self.root, self._settings if old is None else None,
            embedder=old.embedder if old else None, model_error=old.model_error if old else None,
            bulk_in_child=True)  # a long-running server: indexing's model calls in a child
        self._rules: WorkspaceFilter = self._workspace.event_filter()
        self.had_index = self.had_index or self._workspace.has_index()
        if old is not None:
            old.close()

    def _index(self) -> None:
        ws = self._workspace
        assert ws is not None

        def on_progress(progress: IndexProgress) -> None:
            if self._stop.is_set():
                raise Stopped
            phase = WAITING if progress.phase == "wait" else INDEXING
            self._status = KeeperStatus(phase, progress.describe(), progress,
                                        self._status.last_report, self._status.last_change)

        self._set(INDEXING, "scanning files")
        try:
            report = ws.index(progress=on_progress)
        except Stopped:
            return
        except Exception as exc:  # contained: searches go on with what is indexed
            if self._stop.is_set():
                return
            log.warning("indexing %s failed: %s", self.root, exc)
            self._set(FAILED, f"indexing failed: {exc}")
            return
        self._status = KeeperStatus(READY, report.summary(), None, report, time.time())
        log.info("%s: %s", self.root, report.summary())

    def _on_paths(self, paths: list[str]) -> None:
        """From the watcher's thread: note the changes that can matter, drafted by their
        words first (``Workspace.draft_saved``: searchable while the update waits behind a
        compaction or a run). Drafted before they are pending: the update that takes one
        from the pending set begins after its draft, and ends it."""
        rels = [rel for rel in map(self._rules.relative, paths) if rel is not None]
        changed = [rel for rel in rels if rel != CONFIG_FILE_NAME and self._rules.may_matter(rel)]
        ws = self._workspace
        if changed and ws is not None:
            try:
                ws.draft_saved(changed)
            except Exception as exc:  # a head start only: the update follows regardless
                log.warning("%s: could not draft %d changed files: %s", self.root,
                            len(changed), exc)
        index_gone = (ws is not None and any(map(self._rules.in_index_folder, rels))
                      and not ws.index_dir.exists())  # deleted under us: `git clean -xdf`
        if index_gone:
            log.warning("%s: the index folder %s was deleted; indexing again", self.root,
                        ws.index_dir)
        with self._changed:
            self._reopen = self._reopen or CONFIG_FILE_NAME in rels
            self._rescan = self._rescan or index_gone
            for rel in changed:
                if self._rules.is_rule_file(rel):
                    self._rules.forget(rel)
                    self._rescan = True
                self._pending.add(rel)
            if self._pending or self._rescan or self._reopen:
                self._changed.notify_all()

    def _follow_changes(self) -> None:
        updates_since_compact = 0
        while not self._stop.is_set():
            with self._changed:
                idle = COMPACT_AFTER_SECONDS if updates_since_compact else None
                self._changed.wait_for(
                    lambda: self._stop.is_set() or self._pending or self._rescan
                    or self._reopen, timeout=idle)
            if self._stop.is_set():
                return
            if not (self._pending or self._rescan or self._reopen):
                self._compact()  # settled
                updates_since_compact = 0
                continue
            self._settle()
            with self._changed:
                paths, self._pending = sorted(self._pending), set()
                rescan, self._rescan = self._rescan, False
                reopen, self._reopen = self._reopen, False
            try:
                if reopen:  # new settings: reopen with the same model, then a full pass
                    self._open()
                if reopen or rescan:
                    self._index()
                elif paths:
                    self._apply(paths)
                    updates_since_compact += 1
            except Exception as exc:  # contained: the next change tries again
                what = "the new settings" if reopen else f"{len(paths)} changed files"
                log.warning("%s: could not apply %s: %s", self.root, what, exc)
                self._set(self._status.phase, f"could not apply {what}: {exc}")

    def _settle(self) -> None:
        """Wait until events have been quiet a moment (bounded), so a burst is one update."""
        deadline = time.monotonic() + MAX_DELAY_SECONDS
        while time.monotonic() < deadline and not self._stop.is_set():
            with self._changed:
                before = len(self._pending)
                self._changed.wait(QUIET_SECONDS)
                if len(self._pending) == before:
                    return

    def _apply(self, paths: list[str]) -> None:
        ws = self._workspace
        assert ws is not None
        report = ws.update(paths)
        if report.files_indexed or report.files_removed:
            log.info("%s: %d changed files applied (%d indexed, %d removed)", self.root,
                     len(paths), report.files_indexed, report.files_removed)
            # The first run's summary would now be out of date beside the index's totals.
            message = (f"last update: {len(paths)} changed file{'s' if len(paths) != 1 else ''}"
                       f", {report.files_indexed} indexed, {report.files_removed} removed")
            self._status = KeeperStatus(READY, message, None, report, time.time())

    def _compact(self) -> None:
        try:
            if self._workspace is not None:
                self._workspace.compact()
        except Exception as exc:  # an optimisation; never fatal
            log.warning("%s: compaction failed: %s", self.root, exc)

    def _set(self, phase: str, message: str) -> None:
        old = self._status
        self._status = KeeperStatus(phase, message, None, old.last_report, old.last_change)

