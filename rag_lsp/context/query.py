"""A query from what the user is looking at, when they typed none.

From the selection (or the whole file): the enclosing signature, the most frequent
identifiers, and the selected text with a few lines around it. The debugger mode also takes
the error-handling lines nearby, since that is usually where the trouble shows.
"""

from __future__ import annotations

import re
from collections import Counter

from rag_lsp.lines import editor_lines

SIGNATURE = re.compile(
    r"^\s*(?:async\s+def|def|class|function|func|fn|public|private|protected|static|"
    r"export\s+function|interface|struct|impl)\b"
)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
ERROR_LINE = re.compile(r"(?i)\b(?:raise|except|throw|catch|error|exception|panic|assert)\b")
COMMON_WORDS = frozenset(
    "and are as assert async await break class continue def del elif else except false "
    "finally for from function global if import in is lambda let const var none nonlocal not "
    "null or pass raise return self this true try while with yield new int str bool float "
    "void public private static the".split()
)
NEARBY_LINES = 5
MAX_IDENTIFIERS = 12
MAX_QUERY_CHARS = 1200  # the model reads ~256 word-pieces; more is truncated anyway


def derive_query(text: str, selection: tuple[int, int] | None, mode: str) -> str:
    """A search query for ``text`` (a file) with ``selection`` (1-based lines) in focus."""
    lines = editor_lines(text)
    if lines and lines[-1] == "":  # the empty line after a final newline: a cursor there
        lines.pop()  # (an editor counts it) is taken as on the last line, below
    if not lines:
        return ""
    start, end = selection or (1, len(lines))
    start = min(max(1, start), len(lines))
    end = min(len(lines), max(start, end))
    focus = lines[start - 1:end]
    parts: list[str] = []
    signature = next((lines[i].strip() for i in range(start - 1, -1, -1)
                      if SIGNATURE.match(lines[i])), "")
    if signature:
        parts.append(signature)
    counts = Counter(w for w in IDENTIFIER.findall("\n".join(focus))
                     if w.lower() not in COMMON_WORDS)
    parts.append(" ".join(w for w, _n in counts.most_common(MAX_IDENTIFIERS)))
    if selection:
        window = lines[max(0, start - 1 - NEARBY_LINES):min(len(lines), end + NEARBY_LINES)]
        if mode == "debugger":
            parts.extend(line.strip() for line in window if ERROR_LINE.search(line))
        parts.append(" ".join(line.strip() for line in focus))
    query = " ".join(p for p in parts if p)
    return query[:MAX_QUERY_CHARS]
