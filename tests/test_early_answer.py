"""`initialize` answered before pygls loads (``rag_lsp/server/early_answer.py``).

The early answer must be the one pygls gives: compared here with pygls's own, built in this
process, for clients that state every capability the answer could depend on. Run this file as
a script to rewrite ``initialize_result.json`` after a feature is added or removed:

    .venv/bin/python tests/test_early_answer.py
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from lsprotocol import types

from rag_lsp.server.early_answer import RESULT_FILE, EarlyAnsweredWire, early_result
from rag_lsp.server.jsonrpc import LockedWire, encode_frame
from rag_lsp.server.main import build_server

# What VS Code's client states, in the parts a server's answer can depend on (pygls reads
# will-save, rename's prepare support, notebooks and file operations, when it has the
# features), plus every encoding case.
FULL_CLIENT = {
    "general": {"positionEncodings": ["utf-16"]},
    "textDocument": {"synchronization": {"dynamicRegistration": True, "willSave": True,
                                         "willSaveWaitUntil": True, "didSave": True},
                     "rename": {"prepareSupport": True}},
    "workspace": {"workspaceFolders": True, "configuration": True,
                  "fileOperations": {"dynamicRegistration": True, "didCreate": True,
                                     "willCreate": True, "didRename": True, "willRename": True,
                                     "didDelete": True, "willDelete": True}},
    "notebookDocument": {"synchronization": {"dynamicRegistration": True}},
    "window": {"workDoneProgress": True, "showMessage": {}},
}
CLIENTS = {
    "no capabilities": {},
    "VS Code's": FULL_CLIENT,
    "UTF-8 first": {"general": {"positionEncodings": ["utf-8", "utf-16"]}},
    "UTF-32 only": {"general": {"positionEncodings": ["utf-32"]}},
    "none supported": {"general": {"positionEncodings": ["utf-7"]}},
    "an empty list": {"general": {"positionEncodings": []}},
    "general without encodings": {"general": {}},
    "will-save stated false": {"textDocument": {"synchronization": {"willSave": False}}},
    "will-save-wait-until only": {"textDocument": {"synchronization": {
        "willSaveWaitUntil": True}}},
    "empty text document": {"textDocument": {}},
    "null text document": {"textDocument": None},
    "Neovim's (UTF-8 first, will-save)": {
        "general": {"positionEncodings": ["utf-8", "utf-16", "utf-32"]},
        "textDocument": {"synchronization": {"willSave": True, "willSaveWaitUntil": True,
                                             "didSave": True}}},
}


def initialize(capabilities: dict, **params) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": None, "capabilities": capabilities, **params}}


def pygls_result(params: dict) -> dict:
    """pygls's answer to `initialize` with ``params``, as JSON, from a server built here."""
    server = build_server()
    try:
        protocol = server.protocol
        steps = protocol.lsp_initialize(
            protocol._converter.structure(params, types.InitializeParams))
        try:
            handler, args, _ = next(steps)
            while True:  # the features' own initialize handlers, as pygls runs them
                handler(*args)
                handler, args, _ = steps.send(None)
        except StopIteration as done:
            result = done.value
        return json.loads(json.dumps(result, default=protocol._serialize_message))
    finally:
        server.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_the_early_answer_is_pyglss(client):
    message = initialize(CLIENTS[client], workspaceFolders=[], trace="off",
                         clientInfo={"name": "test"}, initializationOptions={"topK": 3})
    expected = pygls_result(message["params"])
    assert early_result(message) == expected, (
        f"{RESULT_FILE.name} is out of date: run `.venv/bin/python tests/test_early_answer.py`")


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": 1, "method": "shutdown"},
    {"jsonrpc": "2.0", "method": "initialize", "params": initialize({})["params"]},  # no id
    initialize([]),
    initialize({}, processId="1234"),
    initialize({}, processId=True),
    initialize({}, rootUri=7),
    initialize({}, workspaceFolders={"uri": "file:///x"}),
    initialize({}, trace="loud"),
    initialize({"general": {"positionEncodings": "utf-8"}}),
    initialize({"general": ["utf-8"]}),
    initialize({"textDocument": {"synchronization": {"willSave": "yes"}}}),
    initialize({"textDocument": ["synchronization"]}),
    initialize({"textDocument": False}),
    initialize({"textDocument": {"synchronization": False}}),
    initialize({}, clientInfo={"version": "1"}),
    initialize({}, workspaceFolders=[{"uri": "file:///x"}]),
    initialize({}, workspaceFolders=["file:///x"]),
    initialize({}, workspaceFolders=[None]),
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
    {"jsonrpc": "2.0", "id": 1, "method": "initialize"},
], ids=lambda m: json.dumps(m.get("params"))[:60])
def test_a_first_message_of_another_shape_is_left_to_pygls(message):
    assert early_result(message) is None


class Stream:
    def __init__(self):
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def frames(data: bytes) -> list[dict]:
    messages = []
    while data:
        header, _, rest = data.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in header.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        messages.append(json.loads(rest[:length]))
        data = rest[length:]
    return messages


def test_pyglss_own_answer_is_dropped_once_and_everything_else_passes(caplog):
    stream = Stream()
    sent = early_result(initialize({}))
    wire = EarlyAnsweredWire(LockedWire(stream), 1, sent)
    log_line = {"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3,
                                                                           "message": "hi"}}
    with caplog.at_level(logging.WARNING, logger="rag_lsp"):
        wire.write(encode_frame(log_line))
        wire.write(encode_frame({"jsonrpc": "2.0", "id": 1, "result": sent}))
        wire.write(encode_frame({"jsonrpc": "2.0", "id": 1, "result": None}))  # a later id 1
    assert frames(stream.data) == [log_line, {"jsonrpc": "2.0", "id": 1, "result": None}]
    assert caplog.records == []


def test_an_answer_that_differs_is_reported(caplog):
    stream = Stream()
    sent = early_result(initialize({}))
    wire = EarlyAnsweredWire(LockedWire(stream), "a", sent)
    other = {**sent, "capabilities": {**sent["capabilities"], "hoverProvider": True}}
    with caplog.at_level(logging.WARNING, logger="rag_lsp"):
        wire.write(encode_frame({"jsonrpc": "2.0", "id": "a", "result": other}))
    assert stream.data == b""
    assert "tests/test_early_answer.py" in caplog.text and "hoverProvider" in caplog.text


def test_an_error_pygls_answers_with_is_shown_to_the_user(caplog):
    """pygls answers with an error when handling `initialize` fails: the client, which has
    a success, is told."""
    stream = Stream()
    wire = EarlyAnsweredWire(LockedWire(stream), 1, early_result(initialize({})))
    error = {"code": -32603, "message": "Internal error: the handler failed"}
    with caplog.at_level(logging.ERROR, logger="rag_lsp"):
        wire.write(encode_frame({"jsonrpc": "2.0", "id": 1, "error": error}))
    [shown] = frames(stream.data)
    assert shown["method"] == "window/showMessage" and shown["params"]["type"] == 1
    assert "the handler failed" in shown["params"]["message"]
    assert "the handler failed" in caplog.text


def test_after_unreadable_params_nothing_is_dropped():
    """pygls does not answer an `initialize` it cannot read: a later answer with the same id
    (the client may reuse it) must not be taken for that answer."""
    stream = Stream()
    wire = EarlyAnsweredWire(LockedWire(stream), 1, early_result(initialize({})))
    wire.unreadable("$.capabilities.x: invalid")
    wire.write(encode_frame({"jsonrpc": "2.0", "id": 1, "result": None}))
    shown, answer = frames(stream.data)
    assert "$.capabilities.x: invalid" in shown["params"]["message"]
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": None}


def test_only_pyglss_first_answer_can_be_the_one_dropped(caplog):
    stream = Stream()
    wire = EarlyAnsweredWire(LockedWire(stream), 1, early_result(initialize({})))
    with caplog.at_level(logging.WARNING, logger="rag_lsp"):
        wire.write(encode_frame({"jsonrpc": "2.0", "id": 7, "result": None}))
        wire.write(encode_frame({"jsonrpc": "2.0", "id": 1, "result": None}))
    assert [m["id"] for m in frames(stream.data)] == [7, 1]
    assert "answered request 7 before" in caplog.text


def session(first: dict, shutdown_id: int) -> subprocess.CompletedProcess:
    """A real `rag-lsp serve` given ``first``, `initialized`, `shutdown` and `exit` at once."""
    messages = [first, {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                {"jsonrpc": "2.0", "id": shutdown_id, "method": "shutdown"},
                {"jsonrpc": "2.0", "method": "exit"}]
    return subprocess.run([sys.executable, "-m", "rag_lsp", "serve"],
                          input=b"".join(encode_frame(m) for m in messages),
                          capture_output=True, timeout=120)


def test_the_server_answers_initialize_once_and_serves_on(tmp_path):
    """The real process: one answer to `initialize` (the early one; pygls's is dropped and
    matched it: no warning), then pygls serves the session it set up from that message."""
    first = initialize(FULL_CLIENT, rootUri=tmp_path.as_uri(),
                       initializationOptions={"indexPath": str(tmp_path / "index")})
    done = session(first, shutdown_id=2)
    answers = [m for m in frames(done.stdout) if "method" not in m]
    assert [a["id"] for a in answers] == [1, 2], answers
    assert answers[0]["result"] == early_result(first)
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": None}
    assert b"differs" not in done.stderr and b"could not read" not in done.stderr, done.stderr
    assert done.returncode == 0


def test_an_initialize_pygls_cannot_read_is_reported_and_the_session_goes_on(tmp_path):
    """A capability value lsprotocol does not know: pygls never answers such a message (it
    did not before either). The client has the early answer, is told what could not be read,
    and its later requests are answered, also one reusing the id."""
    first = initialize({"textDocument": {"hover": {"contentFormat": ["html"]}}},
                       rootUri=tmp_path.as_uri())
    done = session(first, shutdown_id=1)
    sent = frames(done.stdout)
    answers = [m for m in sent if "method" not in m]
    assert answers == [{"jsonrpc": "2.0", "id": 1, "result": early_result(first)},
                       {"jsonrpc": "2.0", "id": 1, "result": None}], sent
    shown = [m["params"]["message"] for m in sent if m.get("method") == "window/showMessage"]
    assert any("could not read the editor's `initialize`" in m and "content_format" in m
               for m in shown), shown
    assert not any("client_capabilities" in m for m in shown), shown  # `initialized` idle
    assert done.returncode == 0


if __name__ == "__main__":  # rewrite the early answer from pygls's
    result = pygls_result(initialize({})["params"])
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULT_FILE}")
