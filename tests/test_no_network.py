"""No network at run time: the real server indexes and searches under strace, and opens no
internet socket (onnxruntime's telemetry used to resolve mobile.events.data.microsoft.com)."""

from __future__ import annotations

import os
import re
import shutil
import time

import pytest

from . import raw_lsp
from .conftest import make_sample_root

pytestmark = pytest.mark.skipif(shutil.which("strace") is None,
                                reason="strace is not installed (`make tools` installs it)")


def test_the_server_opens_no_internet_socket(tmp_path, monkeypatch):
    root = make_sample_root(tmp_path)
    trace = tmp_path / "trace.txt"
    popen = raw_lsp.subprocess.Popen

    def traced(args, **kwargs):
        return popen(["strace", "-f", "-s", "120", "-e", "trace=network", "-o", str(trace),
                      *args], **kwargs)

    monkeypatch.setattr(raw_lsp.subprocess, "Popen", traced)
    server = raw_lsp.RawServer(root)
    try:
        server.wait_for_state("ready")
        answer = server.request("rag/search", {"query": "where are redirects followed?"})
        assert answer["result"]["results"]
        time.sleep(10)  # the telemetry thread reported within seconds of start-up
    finally:
        server.close()
    calls = trace.read_text(encoding="utf-8").splitlines()
    internet = [c for c in calls if re.search(r"\b(connect|sendto|sendmsg)\(", c)
                and ("AF_INET" in c or "htons(53)" in c or "microsoft" in c)]
    assert internet == []
    # The one internet-family socket allowed: urllib3's import-time IPv6 probe (imported by
    # lancedb), bound to ::1 and closed, nothing sent.
    sockets = [c for c in calls if "socket(AF_INET" in c]
    binds = [c for c in calls if re.search(r"\bbind\(", c) and "AF_INET" in c]
    assert len(sockets) <= 1 and all('"::1"' in b for b in binds), sockets + binds


def _internet_use(trace_text: str) -> tuple[list[str], list[str], list[str]]:
    calls = trace_text.splitlines()
    internet = [c for c in calls if re.search(r"\b(connect|sendto|sendmsg)\(", c)
                and ("AF_INET" in c or "htons(53)" in c or "microsoft" in c)]
    sockets = [c for c in calls if "socket(AF_INET" in c]
    binds = [c for c in calls if re.search(r"\bbind\(", c) and "AF_INET" in c]
    return internet, sockets, binds


async def _search_once_indexed(session, query: str, timeout: float = 120.0):
    """Search as an agent does: a first search made while the index is built says "try
    again" (under strace the first batch can take longer than the server's short wait)."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        found = await session.call_tool("search_code", {"query": query})
        text = found.content[0].text
        if "nothing is searchable yet" not in text or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


async def test_the_mcp_server_opens_no_internet_socket(tmp_path):
    """`rag-lsp mcp` (the MCP SDK ships HTTP transports and OpenTelemetry hooks) serves
    stdio only: index, search, record a finding — no internet socket."""
    import sys

    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    root = make_sample_root(tmp_path)
    trace = tmp_path / "trace.txt"
    params = StdioServerParameters(command="strace", args=[
        "-f", "-s", "120", "-e", "trace=network", "-o", str(trace),
        sys.executable, "-m", "rag_lsp", "mcp", str(root)], env=dict(os.environ))
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                found = await _search_once_indexed(session, "redirects")
                assert "src/http/client.py" in found.content[0].text
                added = await session.call_tool("kb_add", {"mode": "debugger",
                                                           "content": "a finding"})
                assert not added.is_error
    internet, sockets, binds = _internet_use(trace.read_text(encoding="utf-8"))
    assert internet == []
    assert len(sockets) <= 1 and all('"::1"' in b for b in binds), sockets + binds
