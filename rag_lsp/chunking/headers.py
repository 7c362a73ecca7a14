"""Contextual chunk headers: where a chunk lives, embedded with it.

A method body alone does not say which file or class it belongs to, so the embedding of
"def send(self, request)" cannot match "how does the HTTP client send a request". Each chunk
of a file is embedded after a one-line header naming its workspace-relative path and, for a
definition, its qualified symbol (``httpx/_client.py: Client.send``). The header is not part
of the chunk's text (results show exact source lines) nor of its full-text entry (which has
the path words already). Its tokens are reserved before chunking, so every chunk still fits
the model's window.
"""

from __future__ import annotations

from dataclasses import replace

from rag_lsp.chunking.types import Chunk, TokenCounter

# Word-pieces kept for the symbol part of the header (``Class.method`` is usually 3-8).
SYMBOL_TOKENS = 12
# A header never takes more than this share of a chunk's budget (deep paths get cut).
MAX_HEADER_SHARE = 4  # i.e. a quarter


def header_reserve(path: str, counter: TokenCounter, max_tokens: int) -> int:
    """Tokens to keep free for the header when chunking a file at ``path``."""
    if not path:
        return 0
    wanted = counter.count(path) + SYMBOL_TOKENS + 1
    return min(wanted, max_tokens // MAX_HEADER_SHARE)


def header_for(path: str, chunk: Chunk) -> str:
    """``path: symbol`` for a definition, else just the path (Markdown keeps its heading
    path in the chunk's own context, so it is not repeated)."""
    symbol = chunk.symbol if chunk.kind != "section" else ""
    return f"{path}: {symbol}" if symbol else path


def add_headers(chunks: list[Chunk], path: str, counter: TokenCounter,
                max_tokens: int) -> list[Chunk]:
    """Each chunk with the longest header that keeps it within ``max_tokens``."""
    if not path:
        return chunks
    out = []
    for chunk in chunks:
        body = counter.count(chunk.embed_text)
        header = ""
        for candidate in (header_for(path, chunk), path, path.rsplit("/", 1)[-1]):
            if body + counter.count(candidate) <= max_tokens:
                header = candidate
                break
        out.append(replace(chunk, header=header) if header else chunk)
    return out
