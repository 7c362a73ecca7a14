"""The server's stdout, read byte for byte from a raw subprocess, holds nothing but
well-formed `Content-Length` frames — even when code inside the server prints."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

from rag_lsp.server.methods import RAG_SEARCH, RAG_STATUS
from tests.conftest import make_sample_root, write_files


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def parse_frames(data: bytes) -> list[dict]:
    """Every byte must belong to a frame: header block, blank line, JSON body of that size."""
    messages, position = [], 0
    while position < len(data):
        header_end = data.index(b"\r\n\r\n", position)
        headers = data[position:header_end].decode("ascii").split("\r\n")
        lengths = [int(h.split(":", 1)[1]) for h in headers
                   if h.lower().startswith("content-length:")]
        assert len(lengths) == 1, f"bad header block {headers!r} at byte {position}"
        assert all(h.lower().startswith(("content-length:", "content-type:")) for h in headers)
        start = header_end + 4
        body = data[start:start + lengths[0]]
        assert len(body) == lengths[0], "truncated frame"
        message = json.loads(body)
        assert message["jsonrpc"] == "2.0"
        messages.append(message)
        position = start + lengths[0]
    return messages


def _complete_frames(data: bytes) -> list[dict]:
    """The messages of the complete frames at the start of ``data`` (a tail may be partial)."""
    messages, position = [], 0
    while (end := data.find(b"\r\n\r\n", position)) >= 0:
        length = next(int(h.split(b":")[1]) for h in data[position:end].split(b"\r\n")
                      if h.lower().startswith(b"content-length"))
        if len(data) < end + 4 + length:
            break
        messages.append(json.loads(data[end + 4:end + 4 + length]))
        position = end + 4 + length
    return messages


def test_stdout_carries_only_frames(tmp_path):
    root = make_sample_root(tmp_path)
    # A stray print in the server process would land on stdout without the redirection.
    sitecustomize = tmp_path / "noisy"
    sitecustomize.mkdir()
    (sitecustomize / "sitecustomize.py").write_text(
        "import atexit, os\n"
        "atexit.register(lambda: (print('stray print at exit'), os.write(1, b'raw fd write\\n')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(sitecustomize)}
    err_log = tmp_path / "stderr.txt"
    with err_log.open("wb") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "rag_lsp", "--stdio"],  # the spelling many editors use
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
        )
    wire = bytearray()  # every byte of stdout, checked as a whole at the end

    def read_until(done, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not done(_complete_frames(bytes(wire))):
            assert time.monotonic() < deadline, _complete_frames(bytes(wire))
            if select.select([server.stdout], [], [], 0.2)[0]:
                wire.extend(os.read(server.stdout.fileno(), 65536))

    def send(*messages: dict) -> None:
        server.stdin.write(b"".join(frame(m) for m in messages))
        server.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
        "initializationOptions": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    read_until(lambda ms: any(m.get("method") == "rag/indexStatus"
                              and m["params"]["state"] == "ready" for m in ms))
    send({"jsonrpc": "2.0", "id": 2, "method": RAG_SEARCH, "params": {"query": "LRU cache"}},
         {"jsonrpc": "2.0", "id": 3, "method": RAG_SEARCH, "params": {"topK": "x"}},
         {"jsonrpc": "2.0", "id": 5, "method": RAG_STATUS},  # params may be omitted
         {"jsonrpc": "2.0", "id": 6, "method": RAG_SEARCH})
    read_until(lambda ms: {2, 3, 5, 6} <= {m.get("id") for m in ms if "method" not in m})
    send({"jsonrpc": "2.0", "id": 4, "method": "shutdown", "params": None},
         # after shutdown a request is answered (a client awaits it), not served
         {"jsonrpc": "2.0", "id": 7, "method": RAG_SEARCH, "params": {"query": "LRU cache"}})
    read_until(lambda ms: {4, 7} <= {m.get("id") for m in ms if "method" not in m})
    send({"jsonrpc": "2.0", "method": "exit", "params": None})
    rest, _ = server.communicate(timeout=60)
    stdout, stderr = bytes(wire) + rest, err_log.read_bytes()
    messages = parse_frames(stdout)
    by_id = {m.get("id"): m for m in messages if "method" not in m}
    assert by_id[1]["result"]["serverInfo"]["name"] == "rag-lsp"
    assert by_id[2]["result"]["results"][0]["path"] == "src/cache/lru.py"
    assert by_id[3]["error"]["code"] == -32602
    assert by_id[5]["result"]["state"] == "ready"
    assert by_id[6]["error"]["code"] == -32602 and "$ = null" in by_id[6]["error"]["message"]
    assert by_id[4]["result"] is None
    assert by_id[7]["error"]["code"] == -32600
    assert "not served after `shutdown`" in by_id[7]["error"]["message"]
    assert b"stray print at exit" in stderr and b"raw fd write" in stderr
    assert server.returncode == 0


def test_the_server_exits_soon_after_its_client_goes_away_mid_index(tmp_path):
    """stdin closed while indexing: the run stops at the next embedding batch instead of
    finishing the workspace first (it used to take as long as the whole run)."""
    root = tmp_path / "repo"
    for i in range(40):  # big files: the old cancellation point (every 25 files) is far
        functions = "\n\n".join(
            f"def step_{i}_{j}(value):\n    \"\"\"Stage {j} of pipeline {i}.\"\"\"\n"
            f"    return value * {j} + {i}\n" for j in range(80))
        write_files(root, {f"pkg/module_{i:03}.py": functions})
    index_path = tmp_path / "index"
    server = subprocess.Popen(
        [sys.executable, "-m", "rag_lsp", "serve"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    server.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": root.as_uri(), "capabilities": {},
        "initializationOptions": {"indexPath": str(index_path)}}}))
    server.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    server.stdin.flush()
    deadline = time.monotonic() + 60
    while not list(index_path.rglob("chunks.lance")) and time.monotonic() < deadline:
        time.sleep(0.2)  # until the first batch is written: indexing is under way
    assert list(index_path.rglob("chunks.lance")), "indexing never started"
    closed = time.monotonic()
    server.stdin.close()
    try:
        server.wait(timeout=30)
    finally:
        server.kill()
    took = time.monotonic() - closed
    # The target is 2 s; the bound leaves room for a loaded machine, and a run that went on
    # to the end (3,200 chunks) takes minutes.
    assert took < 10, f"the server took {took:.1f} s to exit after stdin closed"
