"""One workspace folder as the server tracks it: its engine :class:`Workspace`, the state of its
index, and the bookkeeping that turns file events into index updates."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pygls.uris import from_fs_path, to_fs_path

from rag_lsp.indexing.scan import WorkspaceFilter
from rag_lsp.workspace import Workspace

# Index states on the wire (schemas/protocol/rag.indexStatus.json).
STARTING, INDEXING, READY, DEGRADED, ERROR, DISABLED = (
    "starting", "indexing", "ready", "degraded", "error", "disabled",
)


def uri_to_path(uri: str) -> Path | None:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


def path_to_uri(path: Path | str) -> str:
    return from_fs_path(str(path)) or Path(path).as_uri()


@dataclass(eq=False)
class FolderIndex:
    """A workspace folder's index and what is being done to it.

    Every write (indexing runs, updates from file events, compaction) goes through ``writer``,
    a single thread: one writer per index, and jobs that queue instead of racing.
    """

    uri: str
    workspace: Workspace
    rules: WorkspaceFilter
    writer: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="rag-index")
    )
    state: str = STARTING
    message: str = ""
    percentage: int | None = None  # while a run is under way
    files: int = 0
    chunks: int = 0
    last_update: str | None = None
    # The running indexing run, and how to stop it (checked between files).
    run: asyncio.Task | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    rerun: bool = False  # another (incremental) run was asked for during this one
    # File events waiting to be applied (folder-relative paths), coalesced.
    pending: set[str] = field(default_factory=set)
    rescan: bool = False  # an ignore file changed: the next flush rescans the folder
    first_pending_at: float = 0.0
    flush_timer: asyncio.TimerHandle | None = None
    flushing: bool = False
    updates_since_compact: int = 0
    first_uncompacted_at: float = 0.0
    compact_timer: asyncio.TimerHandle | None = None
    closed: bool = False

    @property
    def root(self) -> Path:
        return self.workspace.root

    @property
    def name(self) -> str:
        return self.root.name or str(self.root)

    @property
    def running(self) -> bool:
        return self.run is not None and not self.run.done()

    def status(self) -> dict:
        return {
            "uri": self.uri,
            "state": self.state,
            "files": self.files,
            "chunks": self.chunks,
            "indexPath": str(self.workspace.index_dir),
            "lastUpdate": self.last_update,
            "message": self.message,
            "percentage": self.percentage,
        }

    def close(self) -> None:
        """Stop work on this folder: cancel the run and pending timers, retire the writer."""
        self.closed = True
        self.cancel.set()
        self.workspace.close()  # a write waiting for another process's lock gives up
        for timer in (self.flush_timer, self.compact_timer):
            if timer is not None:
                timer.cancel()
        self.pending.clear()
        self.writer.shutdown(wait=False, cancel_futures=True)


def folder_of(folders: dict[str, FolderIndex], path: Path) -> FolderIndex | None:
    """The innermost open folder containing ``path``."""
    best: FolderIndex | None = None
    for folder in folders.values():
        if path == folder.root or folder.root in path.parents:
            if best is None or len(folder.root.parts) > len(best.root.parts):
                best = folder
    return best
