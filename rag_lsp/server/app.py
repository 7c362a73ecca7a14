"""The language server: state shared by the features, settings, folders, and stdio start-up.

Only pygls wiring lives here; retrieval is the engine's (``Workspace``). Engine work runs on
executors the server owns (a writer and a reader per folder, a search pool), never the loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from rag_lsp import __version__, memory
from rag_lsp.config import Settings, validate_settings
from rag_lsp.context.modes import unknown_mode_message
from rag_lsp.errors import RagLspError
from rag_lsp.priority import SearchFirst
from rag_lsp.server.client_settings import (
    ClientSettings,
    SettingsProblems,
    fetch_configuration,
    only_search_changed,
)
from rag_lsp.server.errors import RagRequestError, bad_input, not_initialized, report_server_error
from rag_lsp.server.features import file_events, indexing, watching
from rag_lsp.server.folders import FolderIndex, uri_to_path
from rag_lsp.server.methods import RAG_INDEX_STATUS, SETTINGS_SECTION
from rag_lsp.server.registry import FolderRegistry
from rag_lsp.server.status import DISABLED_MESSAGE, index_status, server_status
from rag_lsp.server.stdio import RagProtocol

if TYPE_CHECKING:  # heavy (numpy, onnxruntime): loaded with the model, after `initialize`
    from rag_lsp.embedding.embedder import OnnxEmbedder

log = logging.getLogger(__name__)

SEARCH_THREADS = 2
STARTUP_WAIT_SECONDS = 60.0  # requests that need folders wait this long for start-up
SHUTDOWN_GRACE_SECONDS = 5.0  # then the model child is ended: stopped or stuck, it held exit


def model_key(settings: Settings) -> tuple:
    """The settings the loaded model depends on: another value loads it again."""
    return (settings.model_dir, settings.embed_batch_size, settings.index_threads,
            settings.exact_queries)


class RagServer(LanguageServer):
    """Settings, the model, the folders and their jobs (features see ``state.ServerState``)."""

    def __init__(self) -> None:
        super().__init__("rag-lsp", __version__, protocol_cls=RagProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.None_)
        self.init_options: Any = None
        self.settings = Settings()
        self.settings_problems = SettingsProblems()
        # The editor's settings as given (camelCase) and where each key came from; a folder's
        # own .rag-lsp.json sits underneath them (see settings_for).
        self._client = ClientSettings()
        self.embedder: OnnxEmbedder | None = None
        self.model_error: RagLspError | None = None
        self._model_key: tuple | None = None
        self.registry = FolderRegistry(self)
        self.search_pool = ThreadPoolExecutor(SEARCH_THREADS, thread_name_prefix="rag-search")
        self.priority = SearchFirst()
        self.indexing = indexing.IndexingService(self)
        self.file_events = file_events.FileEventBatches(self)
        self.watching = watching.WatchService(self)
        self.initialize_received = False  # set by `initialize`; requests before it are refused
        self.started = False
        self._started = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shown: set[str] = set()

    # ---- start-up and settings -----------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    async def start(self) -> None:
        """After ``initialized``: settings, model, folders, watchers, first indexing runs."""
        self._loop = asyncio.get_running_loop()
        await self._apply_settings(await fetch_configuration(self), first=True)
        self.started = True
        self._started.set()
        self.send_index_status()

    async def reload_settings(self, pushed: Any) -> None:
        """``workspace/didChangeConfiguration``: use pushed settings, else pull them."""
        if not self.started:
            return
        if isinstance(pushed, dict) and isinstance(pushed.get(SETTINGS_SECTION), dict):
            configuration = pushed[SETTINGS_SECTION]
        else:
            configuration = await fetch_configuration(self)
        await self._apply_settings(configuration)
        self.send_index_status()

    async def _apply_settings(self, configuration: Any, *, first: bool = False) -> None:
        merged, self._client = ClientSettings.merge(self.init_options, configuration)
        settings, problems = validate_settings(
            merged, source=f"the `{SETTINGS_SECTION}` settings", sources=self._client.sources
        )
        self.settings_problems.editor = problems
        self._report_settings_problems(problems)
        if settings == self.settings and not first:
            return
        old, self.settings = self.settings, settings
        if not first and only_search_changed(old, settings) and self.folders:
            for folder in self.folders.values():  # no need to touch the index
                folder.workspace.settings = self.settings_for(folder.root)
            return
        await self.registry.retire_all()
        self.watching.stop()
        if not settings.enabled:
            log.info("disabled in settings: not indexing or watching")
            return
        await self._load_model()
        for uri in self._folder_uris():
            await self.registry.open(uri)
        await self.watching.start()
        memory.freeze_long_lived_objects()  # the model, folders, imports: here to stay

    def _folder_uris(self) -> list[str]:
        folders = [f.uri for f in self.workspace.folders.values()]
        root = self.workspace.root_uri
        return folders or ([root] if root else [])

    async def _load_model(self) -> None:
        key = model_key(self.settings)
        if key == self._model_key:
            return
        from rag_lsp.workspace import load_embedder  # numpy, onnxruntime: after `initialize`

        roots = [uri_to_path(u) for u in self._folder_uris()]
        root = next((r for r in roots if r is not None), None)
        # Indexing's model calls in a child: a server's memory stays that of its searches.
        self.embedder, self.model_error = await asyncio.get_running_loop().run_in_executor(
            self.search_pool, partial(load_embedder, self.settings, root, bulk_in_child=True))
        self._model_key = key
        if self.model_error is not None:
            self.show(types.MessageType.Warning, self.degraded_message(), once=True)

    def degraded_message(self) -> str:
        return (f"rag-lsp: semantic search is off, lexical search only "
                f"(existing indexes still answer): {self.model_error}")

    # ---- folders -------------------------------------------------------------------------

    @property
    def folders(self) -> dict[str, FolderIndex]:
        return self.registry.folders

    def settings_for(self, root: Path) -> Settings:
        found: list[str] = []
        settings = self._client.for_folder(root, found.extend)
        self.settings_problems.set_folder(root, found)
        self._report_settings_problems(found, once=True)
        return settings

    def _report_settings_problems(self, problems: list[str], *, once: bool = False) -> None:
        if problems:
            self.show(types.MessageType.Warning,
                      "rag-lsp: invalid settings, defaults used instead: " + "; ".join(problems),
                      once=once)

    def stop(self) -> None:
        """``shutdown``: stop indexing, watching; writes under way finish, then the child."""
        self.registry.close_all()
        self.watching.stop()
        if self.embedder is not None:
            self.embedder.shut_down(SHUTDOWN_GRACE_SECONDS)

    # ---- state and messages ----------------------------------------------------------------

    report_server_error = report_server_error  # logged, not popped up (see errors.py)

    def set_folder_state(self, folder: FolderIndex, state: str, message: str) -> None:
        folder.state, folder.message = state, message
        self.send_index_status()

    def send_index_status(self) -> None:
        self.protocol.notify(RAG_INDEX_STATUS, index_status(self))

    def status(self) -> dict:
        return server_status(self)

    def require_enabled(self) -> None:
        if not self.enabled:
            raise RagRequestError(DISABLED_MESSAGE, "disabled")

    async def open_folders(self) -> list[FolderIndex]:
        """The folders, for requests that need at least one (waits for start-up)."""
        if not self.initialize_received:
            raise not_initialized(
                "the server is not initialized: send `initialize`, then `initialized`, first")
        if not self.started:
            try:
                await asyncio.wait_for(self._started.wait(), STARTUP_WAIT_SECONDS)
            except TimeoutError:
                raise not_initialized(
                    f"start-up did not finish within {STARTUP_WAIT_SECONDS:.0f} s: the client "
                    "must send `initialized` after `initialize`; retry then") from None
        self.require_enabled()
        if not self.folders:
            raise RagRequestError("no workspace folder is open", "no-folder", retryable=True)
        return list(self.folders.values())

    def check_mode(self, mode: str) -> str:
        # The editor's modes, and those a folder's .rag-lsp.json adds (the CLI accepts those).
        extra = {*self.settings.extra_modes,
                 *(m for f in self.folders.values() for m in f.workspace.settings.extra_modes)}
        problem = unknown_mode_message(mode, tuple(sorted(extra)))
        if problem:
            raise bad_input(f"$.mode = {mode!r}: {problem}")
        return mode

    def request_error(self, message: str) -> RagRequestError:
        return RagRequestError(message)

    def show(self, kind: types.MessageType, message: str, *, once: bool = False) -> None:
        if once and message in self._shown:
            return
        self._shown.add(message)
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.WARNING, message)
        # VS Code runs a `[label](command:…)` link in a pop-up when clicked, and messages
        # quote workspace text: a zero-width space in "](" reads the same and links nothing.
        shown = re.sub(r"\]\((?=(?:command|file|https?):)", "]\u200b(", message, flags=re.I)
        self.window_show_message(types.ShowMessageParams(type=kind, message=shown))

    def show_error(self, message: str) -> None:
        self.show(types.MessageType.Error, message)

    def post(self, callback: Callable[[], None]) -> bool:
        """Run ``callback`` on the event loop, the one writer to the client; False if none runs."""
        if running := self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(callback)
        return running


