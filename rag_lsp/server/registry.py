"""The open workspace folders: opened, replaced and closed under one lock, so a folder is never
open twice (two writers on one index) and a close never races an open."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from rag_lsp.errors import RagLspError
from rag_lsp.server.folders import DEGRADED, FolderIndex, path_to_uri, uri_to_path

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState

log = logging.getLogger(__name__)


class FolderRegistry:
    def __init__(self, server: ServerState):
        self.server = server
        self.folders: dict[str, FolderIndex] = {}
        self._lock = asyncio.Lock()

    async def open(self, uri: str) -> None:
        async with self._lock:
            await self._open(uri)

    async def retire(self, uri: str) -> None:
        """Close a folder and wait for its writer to stop (a cancelled run stops at the next
        file), so a reopened folder never has two writers on one index."""
        async with self._lock:
            await self._retire(uri)

    async def reopen(self, uri: str) -> None:
        """The folder's ``.rag-lsp.json`` changed: start over with its new settings."""
        async with self._lock:
            if _key(uri) in self.folders:
                await self._retire(uri)
                await self._open(uri)

    async def retire_all(self) -> None:
        async with self._lock:
            for uri in list(self.folders):
                await self._retire(uri)

    def close_all(self) -> None:
        """``shutdown`` or exit: stop work at once; in-flight writes finish on their own."""
        for uri in list(self.folders):
            self._close(uri)

    async def _open(self, uri: str) -> None:
        server = self.server
        path = uri_to_path(uri)
        if path is None:
            server.show(types.MessageType.Error, f"rag-lsp: cannot index {uri}: only file:// "
                        "workspace folders are supported")
            return
        if _key(uri) in self.folders:  # (added twice, or spelled with a trailing slash)
            log.info("%s is open already (as %s)", uri, self.folders[_key(uri)].uri)
            return
        from rag_lsp.workspace import Workspace  # the engine loads with the first folder

        try:
            workspace = Workspace.open(
                path, server.settings_for(path), embedder=server.embedder,
                model_error=server.model_error, priority=server.priority,
            )
        except RagLspError as exc:
            server.show(types.MessageType.Error, f"rag-lsp: cannot open {path}: {exc}")
            return
        folder = FolderIndex(uri, workspace, workspace.event_filter())
        self.folders[_key(uri)] = folder
        if workspace.has_index():
            await server.indexing.refresh_counts(folder)
        if workspace.degraded:
            server.set_folder_state(folder, DEGRADED, server.degraded_message())
        else:
            server.indexing.start_run(folder)
        if server.started:
            server.watching.add_folder(folder)

    def _close(self, uri: str) -> FolderIndex | None:
        folder = self.folders.pop(_key(uri), None)
        if folder is not None:
            folder.close()
            self.server.watching.remove_folder(folder.uri)
            self.server.settings_problems.forget_folder(folder.root)
        return folder

    async def _retire(self, uri: str) -> None:
        folder = self._close(uri)
        if folder is not None:
            await folder.jobs.stopped()




def _key(uri: str) -> str:
    """One key per folder: the URI of its real path (no trailing slash, no link, one
    percent-encoding), so a folder added twice in two spellings is one folder, one index."""
    path = uri_to_path(uri)
    if path is None:
        return uri
    try:
        path = path.resolve()
    except (OSError, RuntimeError):  # a loop of links: opening it says so
        pass
    return path_to_uri(path)
