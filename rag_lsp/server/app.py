"""The language server: state shared by the features, settings, folders, and stdio start-up.

Only pygls wiring lives under ``rag_lsp/server``; retrieval is the engine's
(:class:`rag_lsp.workspace.Workspace`). Engine work runs on executors the server owns — one
writer thread per folder, a small pool for searches — so the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from rag_lsp import __version__
from rag_lsp.config import (
    CONFIG_FILE_NAME,
    Settings,
    confine_folder_settings,
    read_settings_file,
    validate_settings,
)
from rag_lsp.context.modes import unknown_mode_message
from rag_lsp.embedding.embedder import OnnxEmbedder
from rag_lsp.errors import ConfigError, RagLspError
from rag_lsp.priority import SearchFirst
from rag_lsp.server.errors import RagRequestError, bad_input, not_initialized
from rag_lsp.server.features import context, indexing, knowledge, lifecycle, search, watching
from rag_lsp.server.folders import (
    DEGRADED,
    DISABLED,
    ERROR,
    INDEXING,
    READY,
    STARTING,
    FolderIndex,
    uri_to_path,
)
from rag_lsp.server.framing import FrameGuard, LockedWire, encode_frame
from rag_lsp.server.methods import RAG_INDEX_STATUS, SETTINGS_SECTION
from rag_lsp.server.stdio import ClientLogHandler, claim_stdout, configure_logging
from rag_lsp.workspace import Workspace, load_embedder

log = logging.getLogger(__name__)

SEARCH_THREADS = 2
STARTUP_WAIT_SECONDS = 60.0  # requests that need folders wait this long for start-up
DISABLED_MESSAGE = (
    "rag-lsp is disabled in settings (`ragLsp.enabled` is false); set it to true to index "
    "and search this workspace."
)


# Settings read per search; changing only these needs no re-index.
SEARCH_SETTINGS = {"top_k", "threshold", "knowledge_threshold", "search_mode"} | {
    f.name for f in dataclasses.fields(Settings) if f.name.startswith("rank_")}


def _only_search_changed(old: Settings, new: Settings) -> bool:
    changed = {f.name for f in dataclasses.fields(Settings)
               if getattr(old, f.name) != getattr(new, f.name)}
    return changed <= SEARCH_SETTINGS


class RagProtocol(LanguageServerProtocol):
    """JSON-RPC allows a request or notification without ``params``; pygls's fallback message
    types require the field, and would drop such a message without any reply."""

    def structure_message(self, data: dict[str, Any]):
        if isinstance(data, dict) and "method" in data and "params" not in data:
            data = {**data, "params": None}
        return super().structure_message(data)


class RagServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "rag-lsp", __version__, text_document_sync_kind=types.TextDocumentSyncKind.None_,
            protocol_cls=RagProtocol,
        )
        self.init_options: Any = None
        self.settings = Settings()
        self.settings_problems: list[str] = []
        # The editor's settings as given (camelCase) and where each key came from; a folder's
        # own .rag-lsp.json sits underneath them (see _settings_for).
        self._client_settings: dict[str, Any] = {}
        self._client_sources: dict[str, str] = {}
        self.embedder: OnnxEmbedder | None = None
        self.model_error: RagLspError | None = None
        self._model_key: tuple | None = None
        self.folders: dict[str, FolderIndex] = {}
        self.search_pool = ThreadPoolExecutor(SEARCH_THREADS, thread_name_prefix="rag-search")
        self.priority = SearchFirst()
        self.indexing = indexing.IndexingService(self)
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
        await self._apply_settings(await self._fetch_configuration(), first=True)
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
            configuration = await self._fetch_configuration()
        await self._apply_settings(configuration)
        self.send_index_status()

    async def _fetch_configuration(self) -> Any:
        caps = self.client_capabilities.workspace
        if not (caps and caps.configuration):
            return None
        try:
            answer = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(
                    section=SETTINGS_SECTION)])
            )
        except Exception as exc:
            log.warning("could not read the editor's %s settings: %s", SETTINGS_SECTION, exc)
            return None
        return answer[0] if answer else None

    def _merged_settings(self, configuration: Any) -> tuple[Any, dict[str, str]]:
        """initializationOptions, overridden by the editor's ``ragLsp`` settings section."""
        init = self.init_options if isinstance(self.init_options, dict) else {}
        if set(init) == {SETTINGS_SECTION}:  # some clients nest options under the section
            init = init[SETTINGS_SECTION]
        if configuration is not None and not isinstance(configuration, dict):
            return configuration, {}  # validate_settings explains the wrong type
        merged = {**init, **(configuration or {})}
        sources = {key: "initializationOptions" for key in init}
        sources.update({key: f"the editor's `{SETTINGS_SECTION}` settings"
                        for key in (configuration or {})})
        return merged, sources

    async def _apply_settings(self, configuration: Any, *, first: bool = False) -> None:
        merged, sources = self._merged_settings(configuration)
        settings, problems = validate_settings(
            merged, source=f"the `{SETTINGS_SECTION}` settings", sources=sources
        )
        self.settings_problems = problems
        self._report_settings_problems(problems)
        self._client_settings = merged if isinstance(merged, dict) else {}
        self._client_sources = sources
        if settings == self.settings and not first:
            return
        old, self.settings = self.settings, settings
        if not first and _only_search_changed(old, settings) and self.folders:
            for folder in self.folders.values():  # no need to touch the index
                folder.workspace.settings = self._settings_for(folder.root)
            return
        for uri in list(self.folders):
            await self.retire_folder(uri)
        self.watching.stop()
        if not settings.enabled:
            log.info("disabled in settings: not indexing or watching")
            return
        await self._load_model()
        for uri in self._folder_uris():
            await self.open_folder(uri)
        await self.watching.start()

    def _folder_uris(self) -> list[str]:
        folders = [f.uri for f in self.workspace.folders.values()]
        root = self.workspace.root_uri
        return folders or ([root] if root else [])

    async def _load_model(self) -> None:
        key = (self.settings.model_dir, self.settings.embed_batch_size)
        if key == self._model_key:
            return
        roots = [uri_to_path(u) for u in self._folder_uris()]
        root = next((r for r in roots if r is not None), None)
        self.embedder, self.model_error = await asyncio.get_running_loop().run_in_executor(
            self.search_pool, load_embedder, self.settings, root
        )
        self._model_key = key
        if self.model_error is not None:
            self.show(types.MessageType.Warning, self.degraded_message(), once=True)

    def degraded_message(self) -> str:
        return (f"rag-lsp: semantic search is off, lexical search only "
                f"(existing indexes still answer): {self.model_error}")

    # ---- folders -------------------------------------------------------------------------

    async def open_folder(self, uri: str) -> None:
        path = uri_to_path(uri)
        if path is None:
            self.show(types.MessageType.Error, f"rag-lsp: cannot index {uri}: only file:// "
                      "workspace folders are supported")
            return
        try:
            workspace = Workspace.open(
                path, self._settings_for(path), embedder=self.embedder,
                model_error=self.model_error, priority=self.priority,
            )
        except RagLspError as exc:
            self.show(types.MessageType.Error, f"rag-lsp: cannot open {path}: {exc}")
            return
        folder = FolderIndex(uri, workspace, workspace.event_filter())
        self.folders[uri] = folder
        if workspace.has_index():
            await self.indexing.refresh_counts(folder)
        if workspace.degraded:
            self.set_folder_state(folder, DEGRADED, self.degraded_message())
        else:
            self.indexing.start_run(folder)
        if self.started:
            self.watching.add_folder(folder)

    def _settings_for(self, root: Path) -> Settings:
        """A folder's settings: its ``.rag-lsp.json`` (shared with the CLI, so both build the
        same index), overridden by the editor's. Each folder needs its own index: an absolute
        ``indexPath`` (say, the editor's storage folder) gets one subfolder per folder."""
        file_settings: dict[str, Any] = {}
        path = root / CONFIG_FILE_NAME
        if path.is_file():
            try:
                file_settings, confined = confine_folder_settings(
                    read_settings_file(path), root, path)
                self._report_settings_problems(confined, once=True)
            except ConfigError as exc:
                self._report_settings_problems(exc.problems, once=True)
        settings, problems = validate_settings(
            {**file_settings, **self._client_settings},
            source=str(path),
            sources={key: str(path) for key in file_settings} | self._client_sources,
        )
        self._report_settings_problems([p for p in problems if str(path) in p], once=True)
        index_path = settings.index_path
        if not index_path or not Path(index_path).expanduser().is_absolute():
            return settings
        digest = hashlib.sha256(str(root).encode()).hexdigest()[:10]
        subfolder = Path(index_path).expanduser() / f"{root.name or 'root'}-{digest}"
        return dataclasses.replace(settings, index_path=str(subfolder))

    def _report_settings_problems(self, problems: list[str], *, once: bool = False) -> None:
        self.settings_problems += [p for p in problems if p not in self.settings_problems]
        if problems:
            self.show(types.MessageType.Warning,
                      "rag-lsp: invalid settings, defaults used instead: " + "; ".join(problems),
                      once=once)

    async def reopen_folder(self, uri: str) -> None:
        """The folder's ``.rag-lsp.json`` changed: start over with its new settings."""
        if uri in self.folders:
            await self.retire_folder(uri)
            await self.open_folder(uri)

    def close_folder(self, uri: str) -> FolderIndex | None:
        folder = self.folders.pop(uri, None)
        if folder is not None:
            folder.close()
            self.watching.remove_folder(uri)
        return folder

    async def retire_folder(self, uri: str) -> None:
        """Close a folder and wait for its writer to stop (a cancelled run stops at the next
        file), so a reopened folder never has two writers on one index."""
        folder = self.close_folder(uri)
        if folder is not None:
            await asyncio.get_running_loop().run_in_executor(None, folder.writer.shutdown, True)

    def stop(self) -> None:
        """``shutdown``: stop indexing and watching; in-flight writes finish on their own."""
        for uri in list(self.folders):
            self.close_folder(uri)
        self.watching.stop()

    # ---- state and messages ----------------------------------------------------------------

    def set_folder_state(self, folder: FolderIndex, state: str, message: str) -> None:
        folder.state, folder.message = state, message
        self.send_index_status()

    def overall_state(self) -> str:
        if not self.enabled:
            return DISABLED
        states = {f.state for f in self.folders.values()}
        for state in (INDEXING, ERROR, DEGRADED):
            if state in states:
                return state
        if not self.started or STARTING in states:
            return STARTING
        return READY

    def send_index_status(self) -> None:
        state = self.overall_state()
        folders = list(self.folders.values())
        if state == DISABLED:
            message = DISABLED_MESSAGE
        else:
            message = next((f.message for f in folders if f.state == state and f.message), "")
        running = [f.percentage for f in folders if f.percentage is not None]
        self.protocol.notify(RAG_INDEX_STATUS, {
            "state": state,
            "percentage": round(sum(running) / len(running)) if running else None,
            "files": sum(f.files for f in folders),
            "chunks": sum(f.chunks for f in folders),
            "message": message,
            "folders": [f.status() for f in folders],
        })

    def status(self) -> dict:
        model: Any = self.embedder
        return {
            "state": self.overall_state(),
            "enabled": self.enabled,
            "folders": [f.status() for f in self.folders.values()],
            "model": {
                "id": model.model_id if model else "",
                "sha256": model.model_sha256 if model else "",
                "dimension": model.dimension if model else 0,
                "loaded": model is not None,
            },
            "degradedReason": str(self.model_error) if self.model_error else None,
            "settingsProblems": self.settings_problems,
        }

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
        problem = unknown_mode_message(mode, self.settings.extra_modes)
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
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def show_error(self, message: str) -> None:
        self.show(types.MessageType.Error, message)

    def post(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the event loop (the only thread that writes to the client)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(callback)


def build_server() -> RagServer:
    server = RagServer()
    for feature in (lifecycle, indexing, watching, search, knowledge, context):
        feature.register(server)
    return server


def serve_stdio(log_level: str = "info") -> None:
    """Serve JSON-RPC on stdin/stdout until the client exits."""
    wire = claim_stdout()
    configure_logging(log_level)
    server = build_server()

    def to_client(kind: types.MessageType, message: str) -> None:
        server.post(lambda: server.window_log_message(
            types.LogMessageParams(type=kind, message=message)))

    logging.getLogger("rag_lsp").addHandler(ClientLogHandler(to_client))
    out = LockedWire(wire)
    stdin = FrameGuard(sys.stdin.buffer, lambda error: out.write(encode_frame(error)))
    try:
        server.start_io(stdin=stdin, stdout=out)
    finally:  # also when the client vanished without `shutdown`: stop indexing, then exit
        server.stop()
