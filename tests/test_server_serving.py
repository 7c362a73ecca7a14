"""The server's message loop and protocol fast paths (``server/serving.py``, ``RagProtocol``):
one hand-over to a thread per message read, our methods' params as parsed JSON, plain answers
written without cattrs — each giving pygls what it gave before."""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from lsprotocol import types
from pygls.io_ import run_async
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage

from rag_lsp.server.framing import FrameGuard
from rag_lsp.server.main import build_server
from rag_lsp.server.serving import FrameReader

from .raw_lsp import frame


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that counts the calls handed to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.calls = 0

    def submit(self, fn, /, *args, **kwargs):
        self.calls += 1
        return super().submit(fn, *args, **kwargs)


class Recorder:
    """What pygls's loop needs of a protocol: it records the messages handed to it."""

    def __init__(self) -> None:
        self.messages: list[dict] = []

    def structure_message(self, data: dict) -> dict:
        return data

    def handle_message(self, message: dict) -> None:
        self.messages.append(message)


def _guard_over(data: bytes) -> FrameGuard:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)  # the end of input after the frames
    return FrameGuard(os.fdopen(read_fd, "rb"), lambda error: None)


MESSAGES = [{"jsonrpc": "2.0", "id": n, "method": "rag/search",
             "params": {"query": "x" * (n * 5000)}} for n in range(1, 4)]


async def test_pygls_loop_reads_each_message_with_one_hand_over():
    """pygls's own loop (``run_async``), as ``serve_io`` runs it, gets every message whole and
    in order, and hands one read per message to a thread (plus the one that meets the end),
    where pygls's own reader handed three (header line, blank line, body)."""
    guard = _guard_over(b"".join(map(frame, MESSAGES)))
    executor, protocol = CountingExecutor(), Recorder()
    try:
        await run_async(stop_event=threading.Event(), reader=FrameReader(guard, executor),
                        protocol=protocol)  # type: ignore[arg-type]
    finally:
        executor.shutdown()
    assert protocol.messages == MESSAGES
    assert executor.calls == len(MESSAGES) + 1


async def test_a_body_longer_than_the_frame_read_is_an_error_not_the_end_of_input():
    guard, executor = _guard_over(frame(MESSAGES[0])), CountingExecutor()
    reader = FrameReader(guard, executor)
    try:
        header = await reader.readline()
        await reader.readline()
        with pytest.raises(RuntimeError, match="frames are read whole"):
            reader.readexactly(int(header.split(b":")[1]) + 1)
    finally:
        executor.shutdown()


async def test_reader_waits_in_a_thread_only_for_a_frame_not_yet_read():
    guard, executor = _guard_over(frame(MESSAGES[0])), CountingExecutor()
    reader = FrameReader(guard, executor)
    try:
        header = await reader.readline()
        assert executor.calls == 1 and header.startswith(b"Content-Length: ")
        assert await reader.readline() == b"\r\n"
        body = await reader.readexactly(int(header.split(b":")[1]))
        assert json.loads(body) == MESSAGES[0] and executor.calls == 1
        assert await reader.readline() == b""  # the end of input: pygls's loop stops
        assert executor.calls == 2
    finally:
        executor.shutdown()


def _parsed(message: dict):
    protocol = build_server().protocol
    return json.loads(json.dumps(message), object_hook=protocol.structure_message)


def test_our_methods_params_stay_parsed_json():
    params = {"query": "retry", "filters": {"paths": ["src/**"], "languages": ["python"]},
              "topK": 5}
    request = _parsed({"jsonrpc": "2.0", "id": 7, "method": "rag/search", "params": params})
    assert type(request) is JsonRPCRequestMessage
    assert (request.id, request.method, request.params) == (7, "rag/search", params)
    assert type(request.params["filters"]) is dict
    without = _parsed({"jsonrpc": "2.0", "id": 8, "method": "rag/status"})
    assert without.params is None  # JSON-RPC allows no params at all
    note = _parsed({"jsonrpc": "2.0", "method": "rag/unknownNote", "params": [1, {"a": 2}]})
    assert type(note) is JsonRPCNotification and note.params == [1, {"a": 2}]
    bare = _parsed({"jsonrpc": "2.0", "method": "rag/unknownNote"})
    assert type(bare) is JsonRPCNotification and bare.params is None
    # Keys as sent, for the schema to judge: pygls's named tuples renamed the first two and
    # could not take the third (the request went unanswered).
    odd = {"type_name": 1, "0": 2, "class": 3}
    assert _parsed({"jsonrpc": "2.0", "id": 9, "method": "rag/search", "params": odd}).params == odd
    # A top-level field JSON-RPC does not define no longer keeps the message from its handler.
    extra = _parsed({"jsonrpc": "2.0", "id": 10, "method": "rag/status", "params": {}, "x": 1})
    assert (type(extra), extra.id, extra.params) == (JsonRPCRequestMessage, 10, {})


def test_lsp_methods_params_are_still_lsprotocol_types():
    uri = "file:///w/a.py"
    note = _parsed({"jsonrpc": "2.0", "method": "workspace/didChangeWatchedFiles",
                    "params": {"changes": [{"uri": uri, "type": 2}]}})
    assert isinstance(note.params, types.DidChangeWatchedFilesParams)
    assert note.params.changes[0].uri == uri
    cancel = _parsed({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 4}})
    assert isinstance(cancel.params, types.CancelParams) and cancel.params.id == 4
    # An answer to one of our requests is pygls's to structure, as before.
    answer = _parsed({"jsonrpc": "2.0", "id": 3, "result": {"a": 1}})
    assert answer.result.a == 1


def test_plain_answers_are_written_as_cattrs_wrote_them():
    protocol = build_server().protocol
    # lsprotocol objects inside an answer: one with an optional field left out (None), one
    # with an enum
    diagnostic = types.Diagnostic(range=types.Range(types.Position(3, 0), types.Position(4, 0)),
                                  message="m", severity=types.DiagnosticSeverity.Warning)
    result = {"results": [{"uri": "file:///a.py", "score": 0.5, "symbol": None,
                           "ranges": [], "at": diagnostic, "tags": ("a", "b"),
                           "kind": types.SymbolKind.Function}],
              "tookMs": 1.25, "partial": False, "warnings": []}
    for answer in (result, [result, None, 1]):
        message = JsonRPCResponseMessage(id=1, jsonrpc="2.0", result=answer)
        assert protocol._serialize_message(message)["result"] is answer  # noqa: SLF001 (as is)
        fast = json.dumps(message, default=protocol._serialize_message)  # noqa: SLF001
        walked = json.dumps(protocol._converter.unstructure(message))  # noqa: SLF001
        assert fast == walked
    empty = JsonRPCResponseMessage(id=2, jsonrpc="2.0", result=None)  # e.g. `shutdown`
    assert json.loads(json.dumps(empty, default=protocol._serialize_message)) == {  # noqa: SLF001
        "id": 2, "jsonrpc": "2.0", "result": None}
