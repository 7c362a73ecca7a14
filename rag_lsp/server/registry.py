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
        # One folder per real path (see _key), and the spellings it was added under: it
        # closes when the last of them is removed.
        self.folders: dict[str, FolderIndex] = {}
        self._spellings: dict[str, set[str]] = {}
        self._lock = asyncio.Lock()

    async def open(self, uri: str) -> None:
        async with self._lock:
            await self._open(uri)

    async def retire(self, uri: str) -> None:
        """The client removed ``uri``: close its folder, unless it was also added under
        another spelling, and wait for its writer to stop (a cancelled run stops at the next
        file), so a reopened folder never has two writers on one index."""
        async with self._lock:
            key = self._key_of(uri)
            if key is None:
                return
            spellings = self._spellings.get(key, set())
            spellings.discard(_spelling(uri))
            if not spellings:
                await self._retire(key)

    async def reopen(self, uri: str) -> None:
        """The folder's ``.rag-lsp.json`` changed: start over with its new settings."""
        async with self._lock:
            key = self._key_of(uri)
            if key is not None:
                spellings = self._spellings.get(key, set())
                await self._retire(key)
                await self._open(uri)
                if key in self.folders:
                    self._spellings[key] |= spellings

    async def retire_all(self) -> None:
        async with self._lock:
            for key in list(self.folders):
                await self._retire(key)

    def close_all(self) -> None:
        """``shutdown`` or exit: stop work at once; in-flight writes finish on their own."""
        for key in list(self.folders):
            self._close(key)

    def _key_of(self, uri: str) -> str | None:
        """The key of the open folder ``uri`` names: by a spelling it was added under (its
        link may have changed since), else by its real path now."""
        spelling = _spelling(uri)
        for key, spellings in self._spellings.items():
            if spelling in spellings:
                return key
        key = _key(uri)
        return key if key in self.folders else None

    async def _open(self, uri: str) -> None:
        server = self.server
        path = uri_to_path(uri)
        if path is None:
            server.show(types.MessageType.Error, f"rag-lsp: cannot index {uri}: only file:// "
                        "workspace folders are supported")
            return
        key = _key(uri)
        if key in self.folders:  # added twice, or under another spelling (a link, a "/")
            log.info("%s is open already (as %s)", uri, self.folders[key].uri)
            self._spellings[key].add(_spelling(uri))
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
        self.folders[key] = folder
        self._spellings[key] = {_spelling(uri)}
        if workspace.has_index():
            await server.indexing.refresh_counts(folder)
        if workspace.degraded:
            server.set_folder_state(folder, DEGRADED, server.degraded_message())
        else:
            server.indexing.start_run(folder)
        if server.started:
            server.watching.add_folder(folder)

    def _close(self, key: str) -> FolderIndex | None:
        self._spellings.pop(key, None)
        folder = self.folders.pop(key, None)
        if folder is not None:
            folder.close()
            self.server.watching.remove_folder(folder.uri)
            self.server.settings_problems.forget_folder(folder.root)
        return folder

    async def _retire(self, key: str) -> None:
        folder = self._close(key)
        if folder is not None:
            await folder.jobs.stopped()


def _spelling(uri: str) -> str:
    """``uri`` as its path spells it (one percent-encoding, no trailing slash)."""
    path = uri_to_path(uri)
    return path_to_uri(path) if path is not None else uri


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
