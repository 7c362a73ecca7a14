"""Helpers for end-to-end tests that drive the real server process over stdio."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from rag_lsp.server.methods import RAG_INDEX_STATUS, RAG_SEARCH
from rag_lsp.server.protocol import problems

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "rag_lsp", "serve"])
WAIT_SECONDS = 60.0


class Recorder:
    """What the server sent that pytest-lsp does not keep: index statuses, registrations."""

    def __init__(self, client: LanguageClient):
        self.statuses: list[dict] = []
        self.schema_problems: list[str] = []  # statuses that broke their schema
        self.registrations: list[types.Registration] = []

        @client.feature(RAG_INDEX_STATUS)
        def on_status(params: Any) -> None:
            status = plain(params)
            self.schema_problems += problems(RAG_INDEX_STATUS, "params", status)
            self.statuses.append(status)

        @client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: types.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

    @property
    def state(self) -> str | None:
        return self.statuses[-1]["state"] if self.statuses else None

    async def wait_for_state(self, state: str, *, after: int = 0,
                             timeout: float = WAIT_SECONDS) -> dict:
        """The first status at index ``after`` or later whose state is ``state``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for status in self.statuses[after:]:
                if status["state"] == state:
                    return status
            await asyncio.sleep(0.02)
        raise AssertionError(f"no {state!r} status within {timeout} s; got {self.statuses}")


def plain(value: Any) -> Any:
    """Params as plain JSON values (pygls may hand over namedtuple-style objects)."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def initialize_params(
    folders: list[Path], options: dict | None = None, client: str = "visual-studio-code"
) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=client_capabilities(client),
        root_uri=folders[0].as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders],
        initialization_options=options or {},
    )


async def search(client: LanguageClient, query: str, **params: Any) -> dict:
    """``rag/search``, checked against the result schema."""
    result = plain(await client.protocol.send_request_async(
        RAG_SEARCH, {"query": query, **params}))
    assert problems(RAG_SEARCH, "result", result) == []
    return result


async def wait_until(check: Callable[[], Any], timeout: float = WAIT_SECONDS,
                     what: str = "condition") -> float:
    """Poll an async ``check`` until it returns truthy; seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if await check():
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} not met within {timeout} s")


def paths_of(result: dict) -> list[str]:
    return [r["path"] for r in result["results"]]


def file_event(path: Path, kind: types.FileChangeType) -> types.FileEvent:
    return types.FileEvent(uri=path.as_uri(), type=kind)


def send_file_events(client: LanguageClient, *changes: tuple[Path, types.FileChangeType]
                     ) -> None:
    """``workspace/didChangeWatchedFiles`` for (path, kind) pairs, as an editor sends it."""
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[file_event(path, kind) for path, kind in changes]))
