"""`rag-lsp mcp` end to end: the real process over stdio, driven by the MCP SDK's own client,
on real indexed workspaces (real model, real LanceDB on disk)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from rag_lsp.agents.answers import estimate_tokens
from rag_lsp.agents.tools import TOOLS_PATH

from .conftest import write_files
from .raw_lsp import RawServer
from .test_concurrent_writers import _assert_no_duplicates, _many_files, _table_rows


@asynccontextmanager
async def mcp_client(root: Path, *args: str):
    # The SDK passes only a few variables by default; the test's own cache folder must go too.
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "rag_lsp", "mcp", str(root), *args],
                                   env=dict(os.environ))
    with open(root.parent / "mcp-stderr.log", "a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def call(session: ClientSession, tool: str, arguments: dict | None = None):
    result = await session.call_tool(tool, arguments or {})
    return result.content[0].text, result.is_error


async def wait_ready(session: ClientSession, timeout: float = 180.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text, _ = await call(session, "index_status")
        if ": ready" in text.split("\n")[0]:
            return text
        assert time.monotonic() < deadline, text
        await asyncio.sleep(0.5)


async def test_every_tool_end_to_end(sample_root):
    async with mcp_client(sample_root) as session:
        listed = (await session.list_tools()).tools
        catalogue = json.loads(TOOLS_PATH.read_text())["tools"]
        assert [t.name for t in listed] == [t["name"] for t in catalogue]
        assert all(t.input_schema == c["inputSchema"] for t, c in zip(listed, catalogue,
                                                                       strict=True))
        status = await wait_ready(session)
        assert "5 files" in status and "semantic + lexical" in status

        text, error = await call(session, "search_code",
                                 {"query": "where are redirects followed?"})
        assert not error
        first = text.split("\n\n")[1]
        assert re.match(r"src/http/client\.py:\d+-\d+  follow_redirects \(function\)", first)
        assert "def follow_redirects(response, max_hops=MAX_HOPS):" in first

        text, error = await call(session, "search_code", {"query": "qzxv wplkr jjtq vvbn"})
        assert not error and text.startswith("No relevant code found")

        text, error = await call(session, "kb_add", {
            "mode": "security", "title": "PBKDF2 iterations",
            "content": "hash_password uses 200,000 PBKDF2 rounds; keep it above 100k.",
            "anchors": [{"path": "src/auth/passwords.py", "start_line": 7, "end_line": 11}]})
        assert not error, text
        entry_id = re.search(r"finding ([0-9a-f]{32})", text).group(1)
        assert "src/auth/passwords.py:7-11" in text

        text, error = await call(session, "kb_search",
                                 {"mode": "security", "query": "how many hashing rounds?"})
        assert not error and entry_id in text and "PBKDF2 iterations" in text
        text, error = await call(session, "kb_list", {"mode": "security"})
        assert not error and "1-1 of 1" in text and entry_id in text

        text, error = await call(session, "get_context", {
            "mode": "security", "query": "password storage", "token_budget": 800})
        assert not error
        assert "PBKDF2 iterations" in text  # the finding just recorded…
        assert "def hash_password" in text  # …and the code


async def test_bad_arguments_are_tool_errors_that_say_how_to_fix(sample_root):
    async with mcp_client(sample_root) as session:
        await wait_ready(session)
        for tool, arguments, says in [
            ("search_code", {"query": "x", "top_k": 0}, "$.top_k = 0: must be at least 1"),
            ("search_code", {"query": "x", "top_k": 5.0}, "$.top_k = 5.0: must be an integer"),
            ("search_code", {}, "$.query: required"),
            ("search_code", {"query": "x", "colour": "red"}, "$.colour: unknown field"),
            ("index_status", {"verbose": True}, "$.verbose: unknown field (it takes no fields)"),
            ("search_code", {"query": 42}, "$.query = 42: must be a string"),
            ("kb_list", {"mode": "astrology"}, "unknown mode 'astrology'"),
            ("kb_add", {"mode": "debugger", "content": "x",
                        "anchors": [{"path": "../outside.py", "start_line": 1}]},
             "$.anchors[0].path"),
            ("get_context", {"query": "x", "token_budget": 5}, "$.token_budget = 5"),
            ("kb_add", {"mode": "debugger", "content": "x",
                        "anchors": [{"path": "src/ht\0tp.py"}]}, "holds a NUL character"),
            ("search_code", {"query": "x", "paths": ["src/[z-a]*"]},
             "the path filter `src/[z-a]*` is not a valid gitignore-style glob"),
        ]:
            text, error = await call(session, tool, arguments)
            assert error and says in text, (tool, arguments, text)
        text, error = await call(session, "kb_add", {
            "mode": "debugger", "content": "x",
            "anchors": [{"path": "src/auth/passwords.py", "end_line": 2}]})
        assert not error and "src/auth/passwords.py:1-2" in text, text
        result = await session.call_tool("no_such_tool", {})
        assert result.is_error and "search_code" in result.content[0].text
        text, error = await call(session, "search_code", {"query": "hash a password"})
        assert not error and "src/auth/passwords.py" in text  # still serving


async def test_a_search_during_the_first_index_answers_and_says_so(tmp_path):
    root = tmp_path / "repo"
    _many_files(root, 40)  # ~500 chunks: the first index takes several seconds
    async with mcp_client(root) as session:
        started = time.monotonic()
        text, error = await call(session, "search_code", {"query": "caching step"})
        answered_in = time.monotonic() - started
        assert not error and "being built" in text, text
        status = await wait_ready(session)
        indexed_in = time.monotonic() - started
        assert answered_in < indexed_in, (answered_in, indexed_in, status)
        text, error = await call(session, "search_code",
                                 {"query": "caching_step_9_3", "max_tokens": 300})
        assert not error and "being built" not in text
        assert text.split("\n\n")[1].startswith("pkg/caching/module_9.py:")
        assert estimate_tokens(text) <= 300


async def test_the_index_follows_file_changes_while_it_serves(sample_root):
    async with mcp_client(sample_root) as session:
        await wait_ready(session)
        (sample_root / "src/zoo.py").write_text(
            "def feed_the_capybara(grams):\n    return grams * 2\n", encoding="utf-8")
        (sample_root / "src/http/client.py").unlink()
        deadline = time.monotonic() + 60
        while True:
            added, _ = await call(session, "search_code", {"query": "feed_the_capybara"})
            removed, _ = await call(session, "search_code", {"query": "follow_redirects"})
            if "src/zoo.py:1-2" in added and "src/http/client.py" not in removed:
                break
            assert time.monotonic() < deadline, (added, removed)
            await asyncio.sleep(0.3)
        status, _ = await call(session, "index_status")
        first = status.splitlines()[0]  # the latest update, not the first run's summary
        assert "last update: " in first and "files scanned" not in first, status
        assert "Indexed: 5 files" in status, status


async def test_an_index_folder_deleted_under_the_server_is_built_again(sample_root):
    async with mcp_client(sample_root) as session:
        await wait_ready(session)
        shutil.rmtree(sample_root / ".rag-lsp")  # as `git clean -xdf` does
        deadline = time.monotonic() + 60
        while True:
            status, _ = await call(session, "index_status")
            found, _ = await call(session, "search_code", {"query": "follow_redirects"})
            if "Indexed: 5 files" in status and "src/http/client.py" in found:
                break
            assert time.monotonic() < deadline, (status, found)
            await asyncio.sleep(0.3)


async def test_an_lsp_server_and_an_mcp_server_share_one_index_under_edits(tmp_path):
    """An editor's language server and an agent's MCP server on one folder: both answer,
    both follow the edits, the one index converges with nothing duplicated."""
    root = tmp_path / "repo"
    _many_files(root, 30)
    lsp = RawServer(root)
    try:
        async with mcp_client(root) as session:
            await asyncio.to_thread(lsp.wait_for_state, "ready")
            await wait_ready(session)
            write_files(root, {f"new_{n}.py": f"def giraffe_neck_{n}():\n    return {n}\n"
                               for n in range(5)})
            (root / "src/cache/lru.py").write_text("def okapi_cache():\n    return 'okapi'\n",
                                                   encoding="utf-8")
            (root / "src/auth/passwords.py").unlink()
            wanted = {f"new_{n}.py" for n in range(5)} | {"src/cache/lru.py"}
            deadline = time.monotonic() + 120
            while True:
                answer = await asyncio.to_thread(lsp.request, "rag/search", {
                    "query": "giraffe_neck okapi_cache", "mode": "lexical", "topK": 20})
                lsp_found = {r["path"] for r in answer["result"]["results"]}
                text, _ = await call(session, "search_code", {
                    "query": "giraffe_neck okapi_cache", "top_k": 20, "snippet_lines": 0})
                mcp_found = set(re.findall(r"^(\S+?):\d+", text, re.MULTILINE))
                gone, _ = await call(session, "search_code", {"query": "hash_password"})
                if wanted <= lsp_found and wanted <= mcp_found and "passwords.py" not in gone:
                    break
                assert time.monotonic() < deadline, (lsp_found, mcp_found, gone)
                await asyncio.sleep(0.5)
    finally:
        lsp.close()
    _assert_no_duplicates(root / ".rag-lsp")
    indexed = set(_table_rows(root / ".rag-lsp", "files", "path"))
    assert wanted <= indexed and "src/auth/passwords.py" not in indexed
    # one index, never a second copy
    assert sorted(p.parent.name for p in root.rglob("chunks.lance")) == [".rag-lsp"]


async def test_without_the_model_it_still_serves_and_says_why(sample_root, tmp_path):
    async with mcp_client(sample_root, "--model-dir", str(tmp_path / "no-model")) as session:
        assert len((await session.list_tools()).tools) == 6
        text, error = await call(session, "search_code", {"query": "redirects"})
        assert error and "model" in text.lower() and "rag-lsp model install" in text
        text, _ = await call(session, "index_status")
        assert "degraded" in text


@pytest.mark.parametrize("bad", ['{"topK": "ten"}', "{not json"])
def test_bad_settings_fail_before_serving_with_the_fix(sample_root, bad):
    import subprocess

    (sample_root / ".rag-lsp.json").write_text(bad, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "rag_lsp", "mcp", str(sample_root)],
                          input="", capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert ".rag-lsp.json" in done.stderr


def test_it_exits_when_the_client_goes_away_mid_index(tmp_path):
    """An agent that quits must not leave an indexer running: stdin closed → exit, even in
    the middle of a first index (measured: ~0.6 s; the bound only proves it is not stuck)."""
    import subprocess

    root = tmp_path / "repo"
    _many_files(root, 40)
    server = subprocess.Popen([sys.executable, "-m", "rag_lsp", "mcp", str(root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "test", "version": "0"}}
    for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "index_status", "arguments": {}}}):
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
    answers = [json.loads(server.stdout.readline()) for _ in range(3)]
    assert "indexing" in answers[2]["result"]["content"][0]["text"] or "starting" in (
        answers[2]["result"]["content"][0]["text"])
    server.stdin.close()
    assert server.wait(timeout=10) == 0


def test_the_keeper_warms_up_after_its_first_index(sample_root, tmp_path):
    """An agent's first search does not wait for the query session or the in-memory copy:
    the keeper loads both once its first run ends."""
    from rag_lsp.agents.keeper import READY, WorkspaceKeeper
    from rag_lsp.config import Settings

    keeper = WorkspaceKeeper(sample_root, Settings.from_dict({"indexPath": str(tmp_path / "ix")}),
                             watch=False)
    keeper.start()
    try:
        deadline = time.monotonic() + 120
        while keeper.status().phase != READY:  # the store exists once the first run wrote it
            assert time.monotonic() < deadline, f"not ready: {keeper.status()}"
            time.sleep(0.05)
        ws = keeper.workspace()
        store = ws._index.store()  # noqa: SLF001
        # Asking vectors_in_memory() would start the load itself: look, do not ask.
        while store._vectors._matrix is None:  # noqa: SLF001
            assert time.monotonic() < deadline, "the in-memory copy did not load"
            time.sleep(0.05)
        assert ws.embedder._query_session is not None  # noqa: SLF001
    finally:
        keeper.close()


def test_lines_the_sdk_would_drop_are_answered_and_serving_goes_on(sample_root):
    """Not JSON, not an object, a wrong jsonrpc, a bad id, params that are not an object:
    the SDK dropped these unanswered (a client awaiting the answer hung)."""
    import subprocess

    server = subprocess.Popen([sys.executable, "-m", "rag_lsp", "mcp", str(sample_root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "test", "version": "0"}}
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
             json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
             "{not json",
             "[1, 2, 3]",
             json.dumps({"jsonrpc": "1.0", "id": 11, "method": "tools/list"}),
             json.dumps({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}),
             json.dumps({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": [1, 2]}),
             json.dumps({"jsonrpc": "2.0", "id": 14}),
             json.dumps({"jsonrpc": "2.0", "id": 15, "method": 5}),
             "",
             json.dumps({"jsonrpc": "2.0", "id": 16, "method": "ping", "params": None}),
             json.dumps({"jsonrpc": "2.0", "id": 13, "method": "tools/list"})]
    answers = _answers(server, lines, 10)
    errors = [(a.get("id"), a["error"]["code"]) for a in answers if "error" in a]
    assert errors == [(None, -32700), (None, -32600), (11, -32600), (None, -32600),
                      (12, -32602), (14, -32600), (15, -32600)]
    assert "params must be an object" in answers[5]["error"]["message"]
    assert answers[-2] == {"jsonrpc": "2.0", "id": 16, "result": {}}  # null params: absent
    assert answers[-1]["id"] == 13 and answers[-1]["result"]["tools"]  # still serving


def test_a_request_before_the_handshake_is_told_to_send_initialize(sample_root):
    """The SDK's own answer was "Invalid request parameters" with empty data."""
    import subprocess

    server = subprocess.Popen([sys.executable, "-m", "rag_lsp", "mcp", str(sample_root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "test", "version": "0"}}
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
             json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"}),
             json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
             json.dumps({"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": hello}),
             json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
             json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})]
    answers = {a["id"]: a for a in _answers(server, lines, 5)}
    assert answers[1]["error"]["code"] == -32602  # the SDK's code, with words that help
    assert "send `initialize` first" in answers[1]["error"]["message"]
    assert answers[2]["error"]["code"] == -32601  # not served: said so, as before
    assert answers[3]["result"] == {} and "result" in answers[4]
    assert answers[5]["result"]["tools"]  # after the handshake, served


def _answers(server, lines: list[str], count: int, seconds: float = 60.0) -> list[dict]:
    """Send ``lines``, read ``count`` answers; a missing answer fails the test (the server
    is killed after ``seconds``) instead of hanging it."""
    import threading

    watchdog = threading.Timer(seconds, server.kill)
    watchdog.start()
    try:
        server.stdin.write("\n".join(lines) + "\n")
        server.stdin.flush()
        answers = []
        for _ in range(count):
            line = server.stdout.readline()
            assert line, f"no answer after {answers} (killed after {seconds:.0f} s)"
            answers.append(json.loads(line))
        return answers
    finally:
        watchdog.cancel()
        server.stdin.close()
        server.wait(timeout=30)


async def test_a_context_answer_stays_within_its_token_budget_first_lines_too(sample_root,
                                                                               token_counter):
    """Its first line repeated the whole query and named what did not fit, uncounted: a
    1,755-character query and token_budget 200 gave an answer of 630 tokens."""
    counter = token_counter
    long_query = "where is the password hashed and how many rounds " * 35
    async with mcp_client(sample_root) as session:
        await wait_ready(session)
        for query, budget in [(long_query, 200), ("password storage", 200),
                              (long_query, 800), ("password storage", 100),
                              ("how are passwords hashed and stored", 130),
                              ("how are passwords hashed and stored", 160)]:
            text, error = await call(session, "get_context", {
                "mode": "security", "query": query, "token_budget": budget})
            assert not error, text
            assert counter.count(text) <= budget, (budget, counter.count(text), text[:300])
            assert "src/auth/passwords.py" in text or "Nothing" in text
        text, _ = await call(session, "get_context", {
            "mode": "security", "query": long_query, "token_budget": 800})
        assert len(text.split("\n", 1)[0]) < 300  # the query is not repeated whole
