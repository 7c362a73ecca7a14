"""The framing guard: every malformed frame gets a JSON-RPC error, and the next good message
is still served. Before the guard, pygls logged these and answered nothing, and a
Content-Length longer than its body wedged the server for good."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time

import pytest

from rag_lsp.server.framing import FrameGuard

from .raw_lsp import frame


def _request(msg_id, method="rag/status", **extra) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {}, **extra}


GOOD = frame(_request(99))
NESTED = b"[" * 100_000 + b"]" * 100_000

# (name, bytes sent before a good request, error codes expected before it)
BAD_INPUT = [
    ("lower-case header is legal", b"content-length: 2\r\n\r\n{}", [-32600]),
    ("non-numeric length", b"Content-Length: ten\r\n\r\n{}", [-32700]),
    ("negative length", b"Content-Length: -5\r\n\r\n{}", [-32700]),
    ("no length header", b"Content-Type: x\r\n\r\n{}", [-32700]),
    ("not a header line", b"hello there\r\n\r\n", [-32700]),
    ("length too short", b"Content-Length: 5\r\n\r\n" + json.dumps(_request(1)).encode(),
     [-32700]),
    ("malformed JSON", b"Content-Length: 9\r\n\r\n{\"id\": 1,", [-32700]),
    ("invalid UTF-8", b"Content-Length: 4\r\n\r\n\"\xff\xfe\"", [-32700]),
    ("batch array", frame([_request(1), _request(2)]), [-32600]),  # type: ignore[arg-type]
    ("jsonrpc 1.0", frame({**_request(1), "jsonrpc": "1.0"}), [-32600]),
    ("no method", frame({"jsonrpc": "2.0", "id": 1}), [-32600]),
    ("object id", frame(_request({"a": 1})), [-32600]),
    ("method not a string", frame({**_request(1), "method": 7}), [-32600]),
    ("deep nesting", b"Content-Length: %d\r\n\r\n" % len(NESTED) + NESTED, [-32600]),
]


class Pipe:
    """A FrameGuard reading one end of an OS pipe that the test writes into."""

    def __init__(self, **options):
        read_fd, self.write_fd = os.pipe()
        self.replies: list[dict] = []
        self.guard = FrameGuard(os.fdopen(read_fd, "rb"), self.replies.append, **options)

    def send(self, data: bytes) -> None:
        writer = threading.Thread(target=os.write, args=(self.write_fd, data))
        writer.start()  # a large frame fills the pipe until the guard reads it
        self._writer = writer

    def next_message(self) -> dict | None:
        header = self.guard.readline()
        if not header:
            return None
        assert header.startswith(b"Content-Length: ") and self.guard.readline() == b"\r\n"
        return json.loads(self.guard.read(int(header.split(b":")[1])))


@pytest.mark.parametrize(("name", "bad", "codes"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_frames_get_an_error_and_the_next_message_is_served(name, bad, codes):
    pipe = Pipe()
    pipe.send(bad + GOOD)
    assert pipe.next_message() == _request(99)
    assert [r["error"]["code"] for r in pipe.replies] == codes
    assert all(r["jsonrpc"] == "2.0" and r["error"]["message"] for r in pipe.replies)


def test_an_invalid_message_keeps_its_own_id_when_usable():
    pipe = Pipe()
    pipe.send(frame({**_request(7), "jsonrpc": "1.0"}) + GOOD)
    pipe.next_message()
    assert pipe.replies[0]["id"] == 7


def test_a_length_longer_than_the_body_does_not_swallow_the_next_message():
    pipe = Pipe()
    body = json.dumps(_request(1)).encode()
    pipe.send(b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body + GOOD)
    assert pipe.next_message() == _request(99)
    assert [r["error"]["code"] for r in pipe.replies] == [-32700]


def test_a_body_that_stops_arriving_is_answered_not_waited_for_forever():
    pipe = Pipe(stall_seconds=0.3)
    pipe.send(b"Content-Length: 500\r\n\r\n{\"jsonrpc\": \"2.0\"")
    answered = threading.Event()
    result: list[dict | None] = []

    def read() -> None:
        result.append(pipe.next_message())
        answered.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 5
    while not pipe.replies:
        assert time.monotonic() < deadline, "no error for a stalled body"
        time.sleep(0.05)
    assert pipe.replies[0]["error"]["code"] == -32700
    assert "stopped after" in pipe.replies[0]["error"]["message"]
    pipe.send(GOOD)  # the client gets its answer and goes on
    assert answered.wait(5) and result == [_request(99)]


def test_an_oversized_message_is_skipped_without_reading_it_into_memory():
    pipe = Pipe(max_message_bytes=1000)
    pipe.send(b"Content-Length: 50000\r\n\r\n" + b"x" * 50000 + GOOD)
    assert pipe.next_message() == _request(99)
    assert pipe.replies[0]["error"]["code"] == -32600
    assert "over the 1000 limit" in pipe.replies[0]["error"]["message"]


def test_end_of_input_ends_the_stream():
    pipe = Pipe()
    pipe.send(GOOD)
    pipe._writer.join()
    os.close(pipe.write_fd)
    assert pipe.next_message() == _request(99)
    assert pipe.next_message() is None


_unread: dict[int, bytes] = {}  # bytes read past the last answer, per process


def _read_frames(process: subprocess.Popen, count: int, timeout: float = 30) -> list[dict]:
    """``count`` answers from the server's stdout, skipping notifications."""
    buffer, messages = _unread.pop(process.pid, b""), []
    deadline = time.monotonic() + timeout
    fd = process.stdout.fileno()
    while len(messages) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"no answer; got {messages}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            buffer += os.read(fd, 65536)
        while b"\r\n\r\n" in buffer:
            head, rest = buffer.split(b"\r\n\r\n", 1)
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            if len(rest) < length:
                break
            message = json.loads(rest[:length])
            buffer = rest[length:]
            if "id" in message and "method" not in message:
                messages.append(message)
    _unread[process.pid] = buffer
    return messages


def test_the_server_answers_bad_frames_and_keeps_serving(tmp_path):
    """The real server process: a lower-case header initializes it, each bad frame gets an
    error, a wedging length does not wedge it, and it still answers afterwards."""
    server = subprocess.Popen([sys.executable, "-m", "rag_lsp", "serve"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    try:
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {},
            "initializationOptions": {"enable": False}}}).encode()
        server.stdin.write(b"content-length: %d\r\n\r\n" % len(init) + init)
        server.stdin.flush()
        assert "result" in _read_frames(server, 1)[0]
        for n, (name, bad, codes) in enumerate(BAD_INPUT, start=100):
            server.stdin.write(bad + frame(_request(n)))
            server.stdin.flush()
            *errors, answer = _read_frames(server, len(codes) + 1)
            assert [e["error"]["code"] for e in errors] == codes, name
            assert answer["id"] == n and "result" in answer, (name, answer)
        server.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
                           + frame({"jsonrpc": "2.0", "method": "exit"}))
        server.stdin.flush()
        assert server.wait(timeout=10) == 0
    finally:
        server.kill()
