"""Splitting files into retrievable chunks, sized in embedding-model tokens.

Every chunk's ``text`` is exactly its source lines, and ``context + "\\n" + text`` fits in
``max_tokens``. The one exception to whole lines: a single line longer than the limit is cut
into consecutive pieces (each an exact slice of that line), since the model would otherwise
silently drop everything past its first ~254 word-pieces.
"""

from __future__ import annotations

from dataclasses import replace

from rag_lsp.chunking.headers import add_headers, header_reserve
from rag_lsp.chunking.languages import language_for
from rag_lsp.chunking.long_lines import split_long_lines
from rag_lsp.chunking.markdown import chunk_markdown
from rag_lsp.chunking.syntax import chunk_syntax, grammar_for
from rag_lsp.chunking.text_windows import DEFAULT_OPTIONS, chunk_text
from rag_lsp.chunking.types import KINDS, Chunk, ChunkOptions, TokenCounter

# Part of the index format: a new value re-chunks every file on the next run, once (chunks
# whose embedded text is unchanged keep their vectors). 2: tree-sitter for 17 languages,
# Python included; 3: a block's closing line folded into the chunk before it.
CHUNKER_VERSION = 3

__all__ = [
    "CHUNKER_VERSION",
    "KINDS", "Chunk", "ChunkOptions", "TokenCounter", "chunk_document", "chunk_markdown",
    "chunk_syntax", "chunk_text", "language_for",
]


def chunk_document(text: str, language: str, counter: TokenCounter,
                   options: ChunkOptions = DEFAULT_OPTIONS, *, path: str = "") -> list[Chunk]:
    """Chunk one file by its language (see :func:`language_for`).

    ``"markdown"`` → heading sections, a language with a tree-sitter grammar (Python and 15
    others, see ``syntax/tables.py``) → its definitions, anything else (or minified code) →
    overlapping token windows. ``path`` names the file
    in log messages, gives Python module chunks their symbol and, with
    ``options.headers``, heads every chunk's embedded text (tokens for it are kept free).
    """
    reserve = header_reserve(path, counter, options.max_tokens) if options.headers else 0
    inner = replace(options, max_tokens=options.max_tokens - reserve,
                    window_tokens=min(options.window_tokens, options.max_tokens - reserve))
    if language == "markdown":
        chunks = chunk_markdown(text, counter, inner)
    else:
        grammar = grammar_for(language, path)
        chunks = chunk_syntax(text, grammar, counter, inner, path=path) if grammar else None
        if chunks is None:
            chunks = chunk_text(text, counter, inner)
    chunks = split_long_lines(chunks, counter, inner.max_tokens)
    return add_headers(chunks, path, counter, options.max_tokens) if reserve else chunks
