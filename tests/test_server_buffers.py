"""Editor buffers are not followed (saves are), so the server keeps none of their text."""

from __future__ import annotations

from tests.inprocess_lsp import InProcessServer


async def test_open_buffers_are_not_kept_in_memory(tmp_path):
    uri = (tmp_path / "big.py").as_uri()
    async with InProcessServer() as lsp:
        await lsp.start(tmp_path, options={"enabled": False})
        lsp.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n" * 100_000}})
        lsp.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"text": "y = 2\n" * 100_000}]})
        await lsp.result("rag/status")  # (answered after the notifications before it)
        assert lsp.server.workspace.text_documents == {}  # pygls held a copy of each
        assert lsp.shown_errors() == []
