"""One workspace folder as the server tracks it: its engine :class:`Workspace`, the state of its
index, and the bookkeeping that turns file events into index updates."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from pygls.uris import from_fs_path, to_fs_path

from rag_lsp.indexing.scan import WorkspaceFilter
from rag_lsp.server.jobs import FolderJobs

if TYPE_CHECKING:  # the engine (LanceDB, numpy) loads after `initialize` is answered
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
    """A workspace folder's index, its state on the wire, and the owner of its jobs."""

    uri: str
    workspace: Workspace
    rules: WorkspaceFilter
    jobs: FolderJobs = field(default_factory=FolderJobs)
    state: str = STARTING
    message: str = ""
    percentage: int | None = None  # while a run is under way
    files: int = 0
    chunks: int = 0
    last_update: str | None = None

    @property
    def closed(self) -> bool:
        return self.jobs.closed

    def mark_updated(self) -> None:
        """The index took changes now (``lastUpdate``)."""
        self.last_update = datetime.now(timezone.utc).isoformat(timespec="seconds")

    @property
    def running(self) -> bool:
        return self.jobs.running

    @property
    def root(self) -> Path:
        return self.workspace.root

    @property
    def name(self) -> str:
        return self.root.name or str(self.root)

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
        """Stop work on this folder (see :meth:`FolderJobs.close`)."""
        self.jobs.close()
        self.workspace.close()  # a write waiting for another process's lock gives up


def folder_of(folders: dict[str, FolderIndex], path: Path) -> FolderIndex | None:
    """The innermost open folder containing ``path``."""
    best: FolderIndex | None = None
    for folder in folders.values():
        if path == folder.root or folder.root in path.parents:
            if best is None or len(folder.root.parts) > len(best.root.parts):
                best = folder
    return best
