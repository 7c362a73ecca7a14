"""The text the full-text index sees for a chunk.

BM25 matches whole words, but code hides words inside identifiers: ``followRedirects`` and
``max_redirect_hops`` should match a query for "redirect". We add the split parts of
compound identifiers and of the file path to the chunk's own text.
"""

from __future__ import annotations

import re

from rag_lsp.terms import split_identifier

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def lexical_text(text: str, path: str, context: str = "") -> str:
    """Chunk text plus its context line, path words and the words inside identifiers."""
    extra: list[str] = []
    seen: set[str] = set()
    for name in _IDENTIFIER.findall(f"{context}\n{text}\n{path}"):
        parts = split_identifier(name)
        if len(parts) < 2:
            continue
        for part in parts:
            key = part.lower()
            if len(key) > 1 and key not in seen:
                seen.add(key)
                extra.append(key)
    path_words = " ".join(re.split(r"[/._\-]+", path))
    return "\n".join(p for p in (context, text, path_words, " ".join(extra)) if p)
