"""A minimal synchronous JSON-RPC client over a server subprocess's stdio, for tests that
need to kill or restart the server (pytest-lsp's client owns its process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    def __init__(self, root: Path, options: dict | None = None, *, stderr: Any = None,
                 capabilities: dict | None = None):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rag_lsp", "serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if stderr is None else stderr,
        )
        self._next_id = 0
        self.notifications: list[dict] = []
        self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                                    "capabilities": capabilities or {},
                                    "initializationOptions": options or {}})
        self.notify("initialized", {})

    def notify(self, method: str, params: Any) -> None:
        self.process.stdin.write(frame({"jsonrpc": "2.0", "method": method, "params": params}))
        self.process.stdin.flush()

    def request(self, method: str, params: Any) -> dict:
        """Send a request and read messages until its response (a dict with result/error)."""
        self._next_id += 1
        self.process.stdin.write(frame({"jsonrpc": "2.0", "id": self._next_id,
                                        "method": method, "params": params}))
        self.process.stdin.flush()
        while True:
            message = self._read()
            if message.get("id") == self._next_id and "method" not in message:
                return message
            if "method" in message and "id" in message:  # a request from the server
                self.process.stdin.write(frame({"jsonrpc": "2.0", "id": message["id"],
                                                "result": None}))
                self.process.stdin.flush()
            elif "method" in message:
                self.notifications.append(message)

    def wait_for_state(self, state: str) -> None:
        self.wait_for(lambda n: n["method"] == "rag/indexStatus"
                      and n["params"]["state"] == state)

    def wait_for(self, wanted: Callable[[dict], bool]) -> dict:
        """The first notification (received so far or next) for which ``wanted`` is true;
        requests from the server meanwhile are answered with ``null``."""
        while True:
            for notification in self.notifications:
                if wanted(notification):
                    return notification
            message = self._read()
            if "method" in message and "id" in message:
                self.process.stdin.write(frame({"jsonrpc": "2.0", "id": message["id"],
                                                "result": None}))
                self.process.stdin.flush()
            elif "method" in message:
                self.notifications.append(message)

    def _read(self) -> dict:
        length = None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise EOFError("the server closed its stdout")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return json.loads(self.process.stdout.read(length))

    def kill(self) -> None:
        self.process.kill()  # SIGKILL: no shutdown, no atexit, no flush
        self.process.wait()

    def close(self) -> None:
        self.request("shutdown", None)
        self.notify("exit", None)
        self.process.wait(timeout=30)
