"""Initialisation, settings, workspace folders and shutdown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from rag_lsp.server.app import RagServer


def register(server: RagServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: RagServer, params: types.InitializeParams) -> None:
        ls.init_options = params.initialization_options
        ls.initialize_received = True

    @server.feature(types.INITIALIZED)
    async def initialized(ls: RagServer, params: types.InitializedParams) -> None:
        await ls.start()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration_changed(
        ls: RagServer, params: types.DidChangeConfigurationParams
    ) -> None:
        await ls.reload_settings(params.settings)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def folders_changed(
        ls: RagServer, params: types.DidChangeWorkspaceFoldersParams
    ) -> None:
        for removed in params.event.removed:
            await ls.retire_folder(removed.uri)
        for added in params.event.added:
            await ls.open_folder(added.uri)
        ls.send_index_status()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: RagServer, params: None) -> None:
        ls.stop()
