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

    def own_path(self, path: Path) -> Path | None:
        """``path`` spelled under :attr:`root` when it lies in this folder, or ``None``. The
        editor may spell the folder through a link to it (its URI's path: macOS's ``/tmp``,
        a linked home folder) while the root is the real path: both spellings are this
        folder's."""
        for base in (self.root, uri_to_path(self.uri)):
            if base is not None and (path == base or base in path.parents):
                return self.root / path.relative_to(base)
        return None

    def uri_of(self, rel: str) -> str:
        """The URI of the file at ``rel``, spelled as the editor opened the folder (through a
        link, maybe), so it opens as the editor's own file."""
        return path_to_uri((uri_to_path(self.uri) or self.root) / rel)

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


def folders_holding(folders: dict[str, FolderIndex], path: Path) -> list[FolderIndex]:
    """Every open folder ``path`` lies in: a folder nested in another is in both indexes,
    and both must follow its files."""
    return [folder for folder in folders.values() if folder.own_path(path) is not None]


def folder_of(folders: dict[str, FolderIndex], path: Path) -> FolderIndex | None:
    """The innermost open folder containing ``path`` (spelled either way: see
    :meth:`FolderIndex.own_path`)."""
    best: FolderIndex | None = None
    for folder in folders.values():
        if folder.own_path(path) is not None:
            if best is None or len(folder.root.parts) > len(best.root.parts):
                best = folder
    return best
