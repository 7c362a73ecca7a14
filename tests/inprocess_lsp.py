"""The server in the test's own process and event loop: pygls's real message loop, fed from
memory, writing to memory.

For tests that reach inside the server (a folder's tasks, its writer thread) or that hold back
the answer to one of the server's own requests. The stdio tests (``lsp_support``,
``raw_lsp``) prove the real process; this proves what happens between its messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pygls.io_ import run_async

from rag_lsp.server.main import build_server
from rag_lsp.server.stdio import AnsweredRequestErrors

WAIT_SECONDS = 60.0


class InProcessServer:
    """``async with InProcessServer() as lsp``: send it messages, read what it sent."""

    def __init__(self) -> None:
        self.server = build_server()
        self.sent: list[dict] = []  # every message the server wrote, in order
        self._out = b""
        self._in = asyncio.StreamReader()
        self._stop = threading.Event()
        self._loop: asyncio.Task | None = None
        self._ids = 0
        self._quiet = AnsweredRequestErrors()  # as serve_stdio's logging has it

    async def __aenter__(self) -> InProcessServer:
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
        logging.getLogger("pygls.protocol.json_rpc").removeFilter(self._quiet)

    # ---- the wire --------------------------------------------------------------------------

    def write(self, data: bytes) -> None:  # the server's stdout
        self._out += data
        while b"\r\n\r\n" in self._out:
            headers, _, rest = self._out.partition(b"\r\n\r\n")
            length = int(headers.split(b"Content-Length:")[1].split(b"\r\n")[0])
            if len(rest) < length:
                return
            self.sent.append(json.loads(rest[:length]))
            self._out = rest[length:]

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

    def shown_errors(self) -> list[str]:
        return [m["params"]["message"] for m in self.sent
                if m.get("method") == "window/showMessage" and m["params"]["type"] == 1]

    # ---- the session -----------------------------------------------------------------------

    async def start(self, folder: Path, capabilities: dict | None = None) -> None:
        """``initialize`` and ``initialized`` with ``folder`` open."""
        answer = await self.request("initialize", {
            "processId": None, "rootUri": folder.as_uri(), "capabilities": capabilities or {},
            "workspaceFolders": [{"uri": folder.as_uri(), "name": folder.name}],
        })
        assert "result" in answer, answer
        self.notify("initialized", {})
