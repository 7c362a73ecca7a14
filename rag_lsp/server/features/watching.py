"""Keeping the index current: file events from the client, or from our own watcher.

Clients that can register file watchers dynamically (VS Code…) get one registration for
``**/*`` and send ``workspace/didChangeWatchedFiles``. For the others (Neovim 0.7, many
minimal clients) the server watches each folder itself (:mod:`rag_lsp.indexing.watch`).
``textDocument/didSave`` feeds the same path. Either way, events end up in
:meth:`FileEventBatches.queue_paths`, which filters and coalesces them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from lsprotocol import types

from rag_lsp.indexing.watch import FolderWatcher
from rag_lsp.server.folders import FolderIndex, folders_holding, uri_to_path

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState

log = logging.getLogger(__name__)


class WatchService:
    def __init__(self, server: ServerState):
        self.server = server
        self._watchers: dict[str, FolderWatcher] = {}
        self._registration_id: str | None = None

    @property
    def client_watches(self) -> bool:
        """True once the client agreed to send us file events for every folder."""
        return self._registration_id is not None

    async def start(self) -> None:
        """Ask the client for file events, or fall back to watching folders ourselves."""
        caps = self.server.client_capabilities.workspace
        dynamic = caps and caps.did_change_watched_files and (
            caps.did_change_watched_files.dynamic_registration)
        if dynamic and self._registration_id is None:
            registration_id = str(uuid.uuid4())
            try:
                await self.server.client_register_capability_async(
                    types.RegistrationParams(registrations=[types.Registration(
                        id=registration_id,
                        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=types.DidChangeWatchedFilesRegistrationOptions(
                            watchers=[types.FileSystemWatcher(glob_pattern="**/*")]
                        ),
                    )])
                )
                self._registration_id = registration_id
                log.info("the editor reports file changes (registered a watcher for **/*)")
            except Exception as exc:
                log.info("the editor refused file watching (%s); watching folders ourselves",
                         exc)
        for folder in self.server.folders.values():
            self.add_folder(folder)

    def add_folder(self, folder: FolderIndex) -> None:
        if self.client_watches or folder.uri in self._watchers:
            return
        loop = asyncio.get_running_loop()

        def on_paths(paths: list[str]) -> None:
            loop.call_soon_threadsafe(self.server.file_events.queue_paths, folder, paths)

        watcher = FolderWatcher(folder.root, on_paths)
        watcher.start()
        self._watchers[folder.uri] = watcher
        log.info("watching %s for changes", folder.root)

    def remove_folder(self, uri: str) -> None:
        watcher = self._watchers.pop(uri, None)
        if watcher is not None:
            watcher.stop()

    def stop(self) -> None:
        for uri in list(self._watchers):
            self.remove_folder(uri)

    def on_uris(self, uris: list[str]) -> None:
        """File events given as URIs (watched-files notifications, saves)."""
        for uri in uris:
            path = uri_to_path(uri)
            for folder in folders_holding(self.server.folders, path) if path else ():
                # (the path spelled under the folder's root: see own_path)
                self.server.file_events.queue_paths(folder, [str(folder.own_path(path))])


def register(server: ServerState) -> None:
    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files_changed(ls: ServerState, params: types.DidChangeWatchedFilesParams) -> None:
        if ls.enabled:
            ls.watching.on_uris([change.uri for change in params.changes])

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def saved(ls: ServerState, params: types.DidSaveTextDocumentParams) -> None:
        if ls.enabled:
            ls.watching.on_uris([params.text_document.uri])
