"""Lines the MCP SDK would drop without a word, answered as JSON-RPC asks.

The SDK reads one JSON-RPC message per line of stdin. A line it cannot read (not JSON, not
an object, a wrong ``jsonrpc``, an id that is neither string nor integer) it drops unseen,
and a request whose ``params`` is not an object it never answers: a client awaiting the
answer waits forever. This module looks at each line first and answers those itself (parse
error, invalid request, invalid params), so the SDK only sees messages it can serve.

A request the server serves, sent before the handshake's ``initialize``, the SDK refuses as
"Invalid request parameters" with nothing more: that one is answered here too, saying to
send ``initialize`` first. (After an ``initialize`` the SDK refused, its own words are back:
this guard sees lines, not answers.)
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
_BEFORE_HANDSHAKE = frozenset({"initialize", "ping"})  # the SDK serves these at any time

Answer = Callable[[Any, int, str], Awaitable[None]]  # (id or None, code, message)


def wire_problem(line: str) -> tuple[Any, int, str] | None:
    """``(id to answer, code, message)`` for a line the SDK would drop or leave unanswered;
    ``None`` for a message it serves (or a notification, which gets no answer either way)."""
    try:
        message = json.loads(line)
    except ValueError as exc:
        return None, PARSE_ERROR, f"parse error: the line is not JSON ({exc})"
    if not isinstance(message, dict):
        return None, INVALID_REQUEST, ("invalid request: a message is one JSON object per "
                                       "line (MCP has no batches)")
    msg_id = message.get("id")
    id_ok = isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))
    if message.get("jsonrpc") != "2.0":
        return (msg_id if id_ok else None), INVALID_REQUEST, (
            'invalid request: "jsonrpc" must be "2.0"')
    if "id" in message and not id_ok:
        return None, INVALID_REQUEST, "invalid request: an id is a string or an integer"
    if "method" in message and not isinstance(message["method"], str):
        return (msg_id if "id" in message else None), INVALID_REQUEST, (
            "invalid request: a method is a string")
    if "method" not in message and not ({"result", "error"} & message.keys()):
        return (msg_id if "id" in message else None), INVALID_REQUEST, (
            "invalid request: a message needs a method (or is an answer: result or error)")
    params = message.get("params")  # null is taken as absent, as the SDK takes it
    if "method" in message and "id" in message and not isinstance(params, dict | None):
        return msg_id, INVALID_PARAMS, (f"invalid params for {message['method']}: params "
                                        "must be an object")
    return None


def handshake_problem(line: str, serves: Callable[[str], bool]) -> tuple[Any, int, str] | None:
    """``(id, code, message)`` for a request the server ``serves`` sent before ``initialize``
    (the code is the SDK's own for it, so clients see no change but the words)."""
    message = json.loads(line)
    method = message.get("method")
    if "id" not in message or method in _BEFORE_HANDSHAKE or not serves(method):
        return None  # a notification, an answer, or a method the SDK says it lacks
    return message["id"], INVALID_PARAMS, (
        f"{method} before the handshake: send `initialize` first (then "
        "`notifications/initialized`), as MCP's lifecycle asks")


def _opens_session(line: str) -> bool:
    return json.loads(line).get("method") in ("initialize", "notifications/initialized")


class GuardedStdin:
    """Stdin's lines for the SDK, the ones :func:`wire_problem` refuses answered instead
    (and, before the handshake, the ones :func:`handshake_problem` refuses).

    Reads a duplicate of fd 0 and points fd 0 at the null device, as the SDK does with the
    stdin it reads itself (given a stdin, it leaves fd 0 alone): a child process or stray
    read then meets the end of input, never the wire."""

    def __init__(self, serves: Callable[[str], bool] = lambda method: False) -> None:
        wire = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self._file = anyio.wrap_file(io.TextIOWrapper(
            os.fdopen(wire, "rb"), encoding="utf-8", errors="replace"))
        self._answer: Answer | None = None
        self._answering = anyio.Event()
        self._serves = serves
        self._greeted = False  # an `initialize` (or a bare `initialized`) has gone by

    def answer_with(self, answer: Answer) -> None:
        """How to answer a refused line (the SDK's write stream exists only once serving)."""
        self._answer = answer
        self._answering.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async with self._file:
            async for line in self._file:
                if not line.strip():
                    continue
                problem = wire_problem(line)
                if problem is None and not self._greeted:
                    problem = handshake_problem(line, self._serves)
                    self._greeted = problem is None and _opens_session(line)
                if problem is None:
                    yield line
                    continue
                await self._answering.wait()
                assert self._answer is not None
                await self._answer(*problem)
