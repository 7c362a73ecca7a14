"""The server in the test's own process and event loop: pygls's real message loop, fed from
memory, writing to memory.

For tests of what a request does — its answer, its error, the statuses and messages it
causes — and for tests that reach inside the server (a folder's tasks, its writer thread) or
hold back the answer to one of the server's own requests. What only the real process shows
(stdio framing, exit when stdin closes, a crash, two processes on one index) is proved by the
stdio tests (``lsp_support``, ``raw_lsp``); a subprocess would add nothing here but seconds.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol.converters import get_converter
from pygls.io_ import run_async
from pytest_lsp import client_capabilities

from rag_lsp.config import Settings
from rag_lsp.server.app import model_key
from rag_lsp.server.main import build_server
from rag_lsp.server.methods import RAG_INDEX_STATUS
from rag_lsp.server.protocol import problems
from rag_lsp.server.stdio import AnsweredRequestErrors

WAIT_SECONDS = 60.0
THREADS_END_SECONDS = 10.0
OUR_THREADS = "rag-"  # the prefix of every thread the server starts (writers, searches, watchers)
# The engine's full-text pool and the idle memory trim live as long as the process.
PROCESS_THREADS = ("rag-fts", "rag-trim")


def capabilities_of(client: str) -> dict:
    """A real client's capabilities as it sends them (pytest-lsp's recordings), e.g.
    ``"visual-studio-code"`` (watcher registration, configuration, progress) or
    ``"neovim@v0.7.0"`` (none of those)."""
    return get_converter().unstructure(client_capabilities(client))


class InProcessServer:
    """``async with InProcessServer() as lsp``: send it messages, read what it sent.

    ``embedder``: the test session's model, used instead of loading another copy while the
    settings ask for the installed model (a ``modelDir`` of their own still loads, or fails,
    as in the real server). ``answer_requests``: answer the server's own requests as an
    editor does — ``workspace/configuration`` from ``configuration`` (section → value),
    anything else with ``null``; without it a test answers them itself (``answer``).
    """

    def __init__(self, *, embedder: Any = None, answer_requests: bool = False,
                 configuration: dict | None = None) -> None:
        self.server = build_server()
        if embedder is not None:
            # What RagServer._load_model keeps of a model it loaded for the settings it
            # depends on: with the defaults, it loads no other copy.
            self.server.embedder = embedder
            self.server._model_key = model_key(Settings())
        self.answer_requests = answer_requests
        self.configuration = configuration or {}
        self.sent: list[dict] = []  # every message the server wrote, in order
        self._out = b""
        self._in = asyncio.StreamReader()
        self._stop = threading.Event()
        self._loop: asyncio.Task | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._ids = 0
        self._threads_before: set[threading.Thread] = set()
        self._quiet = AnsweredRequestErrors()  # as serve_stdio's logging has it

    async def __aenter__(self) -> InProcessServer:
        gc.unfreeze()  # start unfrozen: what the server then freezes (rag_lsp.memory) is its own
        self._threads_before = set(threading.enumerate())
        self._event_loop = asyncio.get_running_loop()
        logging.getLogger("pygls.protocol.json_rpc").addFilter(self._quiet)
        self.server.protocol.set_writer(self)
        self._loop = asyncio.ensure_future(run_async(
            stop_event=self._stop, reader=self._in, protocol=self.server.protocol,
            logger=logging.getLogger("pygls.server"),  # as pygls's own start_io does
            error_handler=self.server.report_server_error,
        ))
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        folders = list(self.server.folders.values())
        self.server.stop()  # as at the end of serve_stdio
        for folder in folders:
            await folder.jobs.stopped()
        self._in.feed_eof()
        await asyncio.wait_for(self._loop, WAIT_SECONDS)
        self.server.search_pool.shutdown(wait=True)
        self.froze_objects = gc.get_freeze_count()
        gc.unfreeze()  # the next test's garbage is collected as usual
        logging.getLogger("pygls.protocol.json_rpc").removeFilter(self._quiet)
        await self._threads_ended()

    async def _threads_ended(self) -> None:
        """Every thread the server started has ended: nothing leaks into the next test."""
        deadline = time.monotonic() + THREADS_END_SECONDS
        while left := [t.name for t in threading.enumerate() if t not in self._threads_before
                       and t.name.startswith(OUR_THREADS)
                       and not t.name.startswith(PROCESS_THREADS) and t.is_alive()]:
            assert time.monotonic() < deadline, f"threads still running after the server: {left}"
            await asyncio.sleep(0.02)

    # ---- the wire --------------------------------------------------------------------------

    def write(self, data: bytes) -> None:  # the server's stdout
        self._out += data
        while b"\r\n\r\n" in self._out:
            headers, _, rest = self._out.partition(b"\r\n\r\n")
            length = int(headers.split(b"Content-Length:")[1].split(b"\r\n")[0])
            if len(rest) < length:
                return
            message = json.loads(rest[:length])
            self.sent.append(message)
            self._out = rest[length:]
            if self.answer_requests and "method" in message and "id" in message:
                self._event_loop.call_soon_threadsafe(self.answer, message,
                                                      self._answer_for(message))

    def _answer_for(self, request: dict) -> Any:
        if request["method"] == "workspace/configuration":
            return [self.configuration.get(item.get("section"))
                    for item in request["params"]["items"]]
        return None

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self._in.feed_data(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, "params": params})

    async def request(self, method: str, params: Any = None) -> dict:
        """Send a request; its answer (a message with ``result`` or ``error``)."""
        self._ids += 1
        msg_id = f"test-{self._ids}"
        self.send({"id": msg_id, "method": method, "params": params})
        return await self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m)

    async def result(self, method: str, params: Any = None) -> Any:
        """A request's result, which must match the method's result schema."""
        answer = await self.request(method, params)
        assert "result" in answer, answer
        assert problems(method, "result", answer["result"]) == [], answer["result"]
        return answer["result"]

    async def error(self, method: str, params: Any = None) -> dict:
        """A request's error (``code``, ``message``, ``data``); a result fails the test."""
        answer = await self.request(method, params)
        assert "error" in answer, answer
        return answer["error"]

    def answer(self, request: dict, result: Any = None) -> None:
        """Answer one of the server's requests."""
        self.send({"id": request["id"], "result": result})

    async def wait_for(self, wanted: Callable[[dict], bool],
                       timeout: float = WAIT_SECONDS) -> dict:
        """The first message the server sent (so far or next) for which ``wanted`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            for message in self.sent:
                if wanted(message):
                    return message
            assert time.monotonic() < deadline, f"nothing wanted within {timeout} s: {self.sent}"
            await asyncio.sleep(0.01)

    # ---- what it sent ----------------------------------------------------------------------

    def notifications(self, method: str) -> list[Any]:
        """The params of every ``method`` notification so far, in order."""
        return [m["params"] for m in self.sent if m.get("method") == method and "id" not in m]

    def requests_sent(self, method: str) -> list[dict]:
        """The server's own requests of ``method`` so far."""
        return [m for m in self.sent if m.get("method") == method and "id" in m]

    def shown(self, kind: int) -> list[str]:
        """``window/showMessage`` texts of one type (1 error, 2 warning, 3 info, 4 log)."""
        return [p["message"] for p in self.notifications("window/showMessage")
                if p["type"] == kind]

    def shown_errors(self) -> list[str]:
        return self.shown(1)

    def statuses(self) -> list[dict]:
        """Every ``rag/indexStatus``, each checked against its schema."""
        statuses = self.notifications(RAG_INDEX_STATUS)
        for status in statuses:
            assert problems(RAG_INDEX_STATUS, "params", status) == [], status
        return statuses

    async def wait_for_state(self, state: str, *, after: int = 0,
                             timeout: float = WAIT_SECONDS) -> dict:
        """The first ``rag/indexStatus`` at index ``after`` or later in ``state``."""
        deadline = time.monotonic() + timeout
        while True:
            for status in self.statuses()[after:]:
                if status["state"] == state:
                    return status
            assert time.monotonic() < deadline, (
                f"no {state!r} status within {timeout} s; got {self.statuses()}")
            await asyncio.sleep(0.01)

    def progress(self, token: Any) -> list[dict]:
        """The ``$/progress`` values sent on ``token`` (begin, reports, end)."""
        return [p["value"] for p in self.notifications("$/progress") if p["token"] == token]

    # ---- the session -----------------------------------------------------------------------

    async def start(self, folders: Path | list[Path] | None, capabilities: dict | None = None,
                    options: Any = None) -> dict:
        """``initialize`` (with ``folders`` open and ``options`` as initializationOptions)
        and ``initialized``; the ``initialize`` result."""
        folders = [folders] if isinstance(folders, Path) else folders or []
        params: dict[str, Any] = {
            "processId": None, "rootUri": folders[0].as_uri() if folders else None,
            "capabilities": capabilities or {},
            "workspaceFolders": [{"uri": f.as_uri(), "name": f.name} for f in folders],
        }
        if options is not None:
            params["initializationOptions"] = options
        answer = await self.request("initialize", params)
        assert "result" in answer, answer
        self.notify("initialized", {})
        return answer["result"]
