"""Contextual chunk headers: every chunk of a file is embedded after its path and symbol,
within the model's window, while its text stays exactly its source lines."""

from __future__ import annotations

import textwrap

from rag_lsp.chunking import ChunkOptions, chunk_document

SOURCE = textwrap.dedent('''
    class Client:
        """Sends requests."""

        def send(self, request):
            return self.transport.handle(request)

        def close(self):
            """Closes every pooled connection and releases the transport's resources."""
            for connection in self.pool.connections:
                connection.close()
            self.transport.release()
''').lstrip()


def test_definitions_are_headed_by_path_and_qualified_symbol(token_counter):
    options = ChunkOptions(max_tokens=40, window_tokens=40, overlap_tokens=0)
    chunks = chunk_document(SOURCE, "python", token_counter, options, path="httpx/_client.py")
    assert chunks and all(c.header.startswith("httpx/_client.py") for c in chunks)
    method = next(c for c in chunks if c.symbol == "Client.send")
    assert method.header == "httpx/_client.py: Client.send"
    assert method.embed_text.startswith("httpx/_client.py: Client.send\n")
    lines = SOURCE.split("\n")
    for chunk in chunks:  # the text is the source, never the header
        assert chunk.text == "\n".join(lines[chunk.start_line - 1:chunk.end_line])
        assert token_counter.count(chunk.embed_text) <= options.max_tokens


def test_markdown_keeps_its_heading_path_once(token_counter):
    text = "# Guide\n\n## Install\n\nRun pip install.\n"
    chunks = chunk_document(text, "markdown", token_counter, path="docs/guide.md")
    install = next(c for c in chunks if c.symbol == "Guide > Install")
    assert install.header == "docs/guide.md"
    assert install.embed_text == "docs/guide.md\nGuide > Install\n## Install\n\nRun pip install."


def test_headers_can_be_switched_off_and_need_a_path(token_counter):
    off = ChunkOptions(headers=False)
    assert all(not c.header for c in chunk_document(SOURCE, "python", token_counter, off,
                                                    path="a.py"))
    assert all(not c.header for c in chunk_document(SOURCE, "python", token_counter))


def test_a_deep_path_never_crowds_out_the_code(token_counter):
    deep = "/".join(["very_long_directory_name"] * 40) + "/module.py"
    options = ChunkOptions(max_tokens=64, window_tokens=64, overlap_tokens=0)
    chunks = chunk_document(SOURCE * 5, "python", token_counter, options, path=deep)
    assert len(chunks) > 1
    for chunk in chunks:
        assert token_counter.count(chunk.embed_text) <= options.max_tokens
        assert token_counter.count(chunk.header) <= options.max_tokens // 4 + 1 or not chunk.header
