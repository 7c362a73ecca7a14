"""Initialisation, settings, workspace folders and shutdown."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState

log = logging.getLogger(__name__)


def register(server: ServerState) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: ServerState, params: types.InitializeParams) -> None:
        ls.init_options = params.initialization_options
        ls.initialize_received = True

    @server.feature(types.INITIALIZED)
    async def initialized(ls: ServerState, params: types.InitializedParams) -> None:
        if not ls.initialize_received:  # its `initialize` could not be read (already said)
            log.debug("`initialized` without a readable `initialize`: not starting")
            return
        await ls.start()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration_changed(
        ls: ServerState, params: types.DidChangeConfigurationParams
    ) -> None:
        await ls.reload_settings(params.settings)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def folders_changed(
        ls: ServerState, params: types.DidChangeWorkspaceFoldersParams
    ) -> None:
        for removed in params.event.removed:
            await ls.registry.retire(removed.uri)
        for added in params.event.added:
            await ls.registry.open(added.uri)
        ls.send_index_status()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: ServerState, params: None) -> None:
        ls.stop()
