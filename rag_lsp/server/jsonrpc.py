"""JSON-RPC messages on the wire: what makes a body one valid message, and writing frames.

stdout is the wire: only JSON-RPC frames may reach it. Anything else that writes to stdout (a
stray ``print``, a native library writing to fd 1) would corrupt the stream for strict clients
such as VS Code. Before serving, the real stdout is kept for the protocol and both
``sys.stdout`` and fd 1 are pointed at stderr (:func:`claim_stdout`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def claim_stdout() -> BinaryIO:
    """A private stream on the original stdout, for JSON-RPC; fd 1 then goes to stderr."""
    sys.stdout.flush()
    wire = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return wire


def encode_frame(message: dict) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class LockedWire:
    """stdout shared by pygls and the guard: each message is written whole, under a lock.

    Once the session is over — the client sent ``exit`` (pygls closes the wire) or stopped
    reading (a broken pipe) — messages still on their way (the end of a run's progress, a
    log line) are dropped: nobody is there to read them, and reporting each as a failed
    send made a stop the client asked for look like a crash.
    """

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def write(self, data: bytes) -> None:
        with self._lock:
            if self._closed:
                log.debug("session over: %d bytes not sent", len(data))
                return
            try:
                self._stream.write(data)
                self._stream.flush()
            except (BrokenPipeError, ConnectionResetError):
                self._closed = True
                log.debug("the client stopped reading: %d bytes not sent", len(data))
                self._close_quietly()

    def flush(self) -> None:  # every write is flushed already
        pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._close_quietly()

    def _close_quietly(self) -> None:
        try:
            self._stream.close()
        except OSError:
            pass  # buffered bytes for a client that has gone; the stream is closed anyway


class FrameProblem(Exception):
    def __init__(self, code: int, message: str, msg_id: Any = None):
        super().__init__(message)
        self.code, self.msg_id = code, msg_id


def check_message(body: bytes) -> None:
    """Raise :class:`FrameProblem` unless ``body`` is one JSON-RPC 2.0 message."""
    try:
        message = json.loads(body)
    except RecursionError:
        raise FrameProblem(INVALID_REQUEST,
                           "Invalid Request: the message nests too deeply") from None
    except ValueError as exc:  # includes bad UTF-8
        raise FrameProblem(PARSE_ERROR,
                           f"Parse error: the body is not valid JSON ({exc})") from None
    if isinstance(message, list):
        raise FrameProblem(INVALID_REQUEST, "Invalid Request: batches are not part of LSP; "
                                            "send one message per frame")
    if not isinstance(message, dict):
        raise FrameProblem(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    msg_id = message.get("id")
    if msg_id is not None and (isinstance(msg_id, bool)
                               or not isinstance(msg_id, (str, int))):
        raise FrameProblem(INVALID_REQUEST, "Invalid Request: `id` must be a string or an "
                                            f"integer, not {type(msg_id).__name__}")
    if message.get("jsonrpc") != "2.0":
        raise FrameProblem(INVALID_REQUEST, 'Invalid Request: `jsonrpc` must be "2.0" '
                                            f"(got {message.get('jsonrpc')!r})", msg_id)
    if "method" in message:
        if not isinstance(message["method"], str):
            raise FrameProblem(INVALID_REQUEST, "Invalid Request: `method` must be a string",
                               msg_id)
    elif "result" not in message and "error" not in message:
        raise FrameProblem(INVALID_REQUEST, "Invalid Request: no `method` (nor a `result` or "
                                            "`error` answering one of ours)", msg_id)
