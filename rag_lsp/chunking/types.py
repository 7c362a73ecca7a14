"""Types shared by every chunker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# Chunk kinds stored in the index and offered as search filters.
KINDS = ("module", "section", "class", "function", "method", "constant", "text")


class TokenCounter(Protocol):
    """Counts tokens the way the embedding model will see them (no special tokens)."""

    def count(self, text: str) -> int: ...

    def counts(self, texts: Sequence[str]) -> list[int]:
        """``count`` of each text, as one call (faster than one call a text)."""
        ...


@dataclass(frozen=True)
class ChunkOptions:
    """Size limits, in model tokens.

    ``max_tokens`` bounds what is embedded for one chunk (context line + text); the model
    silently truncates anything longer. ``window_tokens``/``overlap_tokens`` shape the
    generic text windows.
    """

    max_tokens: int = 254  # 256 word-pieces minus [CLS] and [SEP]
    window_tokens: int = 254
    overlap_tokens: int = 32
    headers: bool = True  # head each chunk's embedded text with its path and symbol


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of a file.

    ``text`` is exactly the source lines ``start_line``..``end_line`` (1-based, inclusive).
    ``context`` is embedded with the text but never shown as source: the heading path of a
    Markdown section, or the signature of the definition a piece belongs to. ``header``
    (see :mod:`rag_lsp.chunking.headers`) names the file and symbol, for the embedding only.
    """

    start_line: int
    end_line: int
    kind: str
    text: str
    symbol: str = ""
    context: str = ""
    header: str = ""

    @property
    def embed_text(self) -> str:
        """What the model reads: header, context and text, one per line."""
        return "\n".join(part for part in (self.header, self.context, self.text) if part)
