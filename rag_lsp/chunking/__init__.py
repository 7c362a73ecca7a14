"""Splitting files into retrievable chunks, sized in embedding-model tokens.

Every chunk's ``text`` is exactly its source lines, and ``context + "\\n" + text`` fits in
``max_tokens`` — except a single line that alone is longer, which is emitted by itself (the
model truncates it) because chunks never cut a line.
"""

from __future__ import annotations

from rag_lsp.chunking.languages import language_for
from rag_lsp.chunking.markdown import chunk_markdown
from rag_lsp.chunking.python_code import chunk_python
from rag_lsp.chunking.text_windows import DEFAULT_OPTIONS, chunk_text
from rag_lsp.chunking.types import KINDS, Chunk, ChunkOptions, TokenCounter

__all__ = [
    "KINDS", "Chunk", "ChunkOptions", "TokenCounter", "chunk_document", "chunk_markdown",
    "chunk_python", "chunk_text", "language_for",
]


def chunk_document(text: str, language: str, counter: TokenCounter,
                   options: ChunkOptions = DEFAULT_OPTIONS, *, path: str = "") -> list[Chunk]:
    """Chunk one file by its language (see :func:`language_for`).

    ``"markdown"`` → heading sections, ``"python"`` → AST definitions (plain-text windows if
    it does not parse), anything else → overlapping token windows. ``path`` names the file
    in log messages and gives Python module chunks their symbol.
    """
    if language == "markdown":
        return chunk_markdown(text, counter, options)
    if language == "python":
        return chunk_python(text, counter, options, path=path)
    return chunk_text(text, counter, options)
