"""What a feature may use of the server: a narrow interface, not the server class.

Features (``rag_lsp/server/features``) and progress reporting are typed against
:class:`ServerState`; :class:`rag_lsp.server.app.RagServer` implements it. So no feature
imports the server module (which imports every feature to register it): no import cycle, and a
feature's reach into the server is written down here.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from rag_lsp.config import Settings
from rag_lsp.server.client_settings import SettingsProblems
from rag_lsp.server.folders import FolderIndex


class IndexingJobs(Protocol):
    """The per-folder indexing runs (``features/indexing.py``)."""

    def start_run(self, folder: FolderIndex, *, full: bool = False) -> bool: ...

    async def refresh_counts(self, folder: FolderIndex) -> None: ...


class FileEvents(Protocol):
    """File events into updates (``features/file_events.py``)."""

    def queue_paths(self, folder: FolderIndex, paths: Iterable[str]) -> None: ...

    def schedule_flush(self, folder: FolderIndex, delay: float | None = None) -> None: ...


class FileWatching(Protocol):
    """File events into indexing jobs (``features/watching.py``)."""

    def on_uris(self, uris: list[str]) -> None: ...

    def add_folder(self, folder: FolderIndex) -> None: ...

    def remove_folder(self, uri: str) -> None: ...


class Folders(Protocol):
    """The folder registry (``registry.py``)."""

    async def open(self, uri: str) -> None: ...

    async def retire(self, uri: str) -> None: ...

    async def reopen(self, uri: str) -> None: ...


class ServerState(Protocol):
    # state
    settings: Settings
    search_pool: ThreadPoolExecutor
    registry: Folders
    indexing: IndexingJobs
    file_events: FileEvents
    watching: FileWatching
    embedder: Any
    model_error: Any
    priority: Any
    init_options: Any
    initialize_received: bool
    started: bool
    settings_problems: SettingsProblems

    @property
    def enabled(self) -> bool: ...

    @property
    def folders(self) -> dict[str, FolderIndex]: ...

    def settings_for(self, root: Path) -> Settings: ...

    # pygls's LanguageServer, as features use it
    client_capabilities: Any
    work_done_progress: Any
    protocol: Any

    def feature(self, name: str, options: Any = None) -> Any: ...

    async def client_register_capability_async(self, params: Any) -> Any: ...

    # lifecycle
    async def start(self) -> None: ...

    async def reload_settings(self, pushed: Any) -> None: ...

    def stop(self) -> None: ...

    async def open_folders(self) -> list[FolderIndex]: ...

    # requests and messages
    def require_enabled(self) -> None: ...

    def check_mode(self, mode: str) -> str: ...

    def request_error(self, message: str) -> Exception: ...

    def set_folder_state(self, folder: FolderIndex, state: str, message: str) -> None: ...

    def send_index_status(self) -> None: ...

    def degraded_message(self) -> str: ...

    def show(self, kind: Any, message: str, *, once: bool = False) -> None: ...

    def show_error(self, message: str) -> None: ...

    def status(self) -> dict: ...
