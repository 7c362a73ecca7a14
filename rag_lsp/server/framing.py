"""A guard in front of pygls's reader: only well-formed JSON-RPC frames get through.

pygls reads ``Content-Length: N`` with a case-sensitive pattern, trusts N, and logs any body
it cannot handle. So a lower-case header (legal), a wrong or non-numeric length, or a body
that is not one JSON-RPC message used to get no reply at all, and a length longer than the
body wedged the server for good (it waited for bytes that never came, the client for an
answer). This guard reads stdin itself and:

- accepts header names in any case and ignores headers other than Content-Length;
- answers a frame it cannot use with a JSON-RPC error (-32700 parse error, -32600 invalid
  request; id null unless the message's own id is usable) and resynchronises on the next
  ``Content-Length`` header, so the next good message is served;
- gives up on a body that stops arriving (``BODY_STALL_SECONDS`` with no byte) instead of
  waiting forever; skips, without holding it in memory, a body over ``MAX_MESSAGE_BYTES``;
- hands pygls each good message as a canonical frame, through the ``readline``/``read``
  calls pygls's stdin reader makes.
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
from collections.abc import Callable
from typing import BinaryIO

from rag_lsp.server.jsonrpc import INVALID_REQUEST, PARSE_ERROR, FrameProblem, check_message

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
BODY_STALL_SECONDS = 2.0
_MAX_HEADER_BYTES = 8192
_READ_SIZE = 65536
_HEADER = re.compile(rb"content-length\s*:", re.IGNORECASE)


class FrameGuard:
    """A stdin for pygls (``readline`` and ``read``, called from its reader thread) that
    yields canonical frames of good messages and answers bad ones through ``reply``."""

    def __init__(self, stream: BinaryIO, reply: Callable[[dict], None], *,
                 max_message_bytes: int = MAX_MESSAGE_BYTES,
                 stall_seconds: float = BODY_STALL_SECONDS):
        self._stream = stream  # kept open: its descriptor is read directly
        self._fd = stream.fileno()
        self._reply = reply
        self._max = max_message_bytes
        self._stall = stall_seconds
        self._raw = bytearray()  # read from stdin, not yet framed
        self._out = bytearray()  # canonical frames for pygls
        self._eof = False

    def peek(self) -> dict | None:
        """The next good message, parsed and still there for pygls to read; None at the end
        of input. (Bad frames before it are answered, as ever.)"""
        if not self._out and not self._next_frame():
            return None
        header_end = self._out.index(b"\r\n\r\n") + 4
        length = int(self._out[len(b"Content-Length: "):header_end - 4])
        return json.loads(self._out[header_end:header_end + length])

    # ---- what pygls calls ----------------------------------------------------------------

    def buffered(self) -> int:
        """Bytes of good frames read and not yet taken: ``readline`` and ``read`` of at most
        that many do not wait for stdin."""
        return len(self._out)

    def readline(self) -> bytes:
        if not self._out and not self._next_frame():
            return b""
        end = self._out.find(b"\n") + 1 or len(self._out)
        line = bytes(self._out[:end])
        del self._out[:end]
        return line

    def read(self, size: int) -> bytes:
        data = bytes(self._out[:size])
        del self._out[:size]
        return data

    # ---- framing -------------------------------------------------------------------------

    def _next_frame(self) -> bool:
        """Fill ``_out`` with the next good message; False at the end of input."""
        while True:
            length = self._read_headers()
            if length is None:
                return False
            if isinstance(length, FrameProblem):
                self._answer(length)
                self._resync()
                continue
            if length > self._max:
                self._answer(FrameProblem(INVALID_REQUEST, f"Invalid Request: a message of "
                                          f"{length} bytes is over the {self._max} limit"))
                if not self._skip(length):
                    return False
                continue
            body = self._read_body(length)
            if body is None:
                return False
            if isinstance(body, FrameProblem):
                self._answer(body)
                self._resync()  # what did arrive may hold the next frame's header
                continue
            try:
                check_message(body)
            except FrameProblem as problem:
                self._answer(problem)
                # A length longer than its body swallowed the next frame: serve that one.
                found = _HEADER.search(body, 1)
                if found:
                    self._raw[:0] = body[found.start():]
                else:  # a length shorter than its body leaves the rest of it: skip that
                    self._resync()
                continue
            self._out += b"Content-Length: %d\r\n\r\n" % len(body) + body
            return True

    def _read_headers(self) -> int | FrameProblem | None:
        """The Content-Length of the next frame, a problem with its headers, or None at
        the end of input."""
        length: int | FrameProblem | None = None
        seen_any = False
        while True:
            line = self._read_line()
            if line is None:
                return None
            if not line.strip():
                if not seen_any:
                    continue  # stray blank lines between frames
                break
            seen_any = True
            header = _HEADER.search(line)
            if header and header.start() > 0:  # bytes glued in front of a header
                self._raw[:0] = line[header.start():]
                return FrameProblem(PARSE_ERROR, f"Parse error: {line[:header.start()][:60]!r}"
                                                 " is not part of a frame")
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                return FrameProblem(PARSE_ERROR, f"Parse error: {line[:60]!r} is not a header "
                                                 "line (expected `Content-Length: <bytes>`)")
            if name.strip().lower() == "content-length":
                text = value.strip()
                length = int(text) if text.isdigit() else FrameProblem(
                    PARSE_ERROR, f"Parse error: Content-Length {text[:40]!r} is not a "
                                 "byte count")
        if length is None:
            return FrameProblem(PARSE_ERROR, "Parse error: a frame without a Content-Length "
                                             "header")
        if isinstance(length, int) and length == 0:
            return FrameProblem(PARSE_ERROR, "Parse error: Content-Length 0 (an empty body)")
        return length

    def _read_line(self) -> bytes | None:
        while True:
            end = self._raw.find(b"\n")
            if end >= 0:
                line = bytes(self._raw[: end + 1])
                del self._raw[: end + 1]
                return line
            if len(self._raw) > _MAX_HEADER_BYTES:
                line = bytes(self._raw)
                self._raw.clear()
                return line  # no header is this long: reported as a bad header line
            if not self._fill(None):
                return None

    def _read_body(self, length: int) -> bytes | FrameProblem | None:
        """The next ``length`` bytes; a problem if they stop coming; None at the end."""
        while len(self._raw) < length:
            if not self._fill(self._stall):
                if self._eof:
                    return None
                return FrameProblem(PARSE_ERROR, f"Parse error: the body stopped after "
                                    f"{len(self._raw)} of the {length} bytes its "
                                    f"Content-Length announced ({self._stall:g} s without "
                                    "data)")
        body = bytes(self._raw[:length])
        del self._raw[:length]
        return body

    def _skip(self, length: int) -> bool:
        while length > 0:
            if not self._raw and not self._fill(self._stall):
                return not self._eof
            taken = min(length, len(self._raw))
            del self._raw[:taken]
            length -= taken
        return True

    def _resync(self) -> None:
        """Drop input up to the next Content-Length header, reading on until one comes (or
        the input ends)."""
        while True:
            found = _HEADER.search(self._raw)
            if found:
                del self._raw[: found.start()]
                return
            del self._raw[: max(0, len(self._raw) - 15)]  # may be the start of a header
            if not self._fill(None):
                return

    def _fill(self, timeout: float | None) -> bool:
        """Read what stdin has (waiting at most ``timeout`` s); False on timeout or EOF."""
        if self._eof:
            return False
        if timeout is not None and sys.platform != "win32":
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                return False
        data = os.read(self._fd, _READ_SIZE)
        if not data:
            self._eof = True
            return False
        self._raw += data
        return True

    def _answer(self, problem: FrameProblem) -> None:
        self._reply({"jsonrpc": "2.0", "id": problem.msg_id,
                     "error": {"code": problem.code, "message": str(problem)}})
