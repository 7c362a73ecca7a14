"""Per-mode knowledge bases: notes kept about a workspace, searchable by meaning, anchored
to lines of code that are re-checked so stale notes show.

    kb = KnowledgeBase(index_dir, root, embedder.embed, embedder.dimension)
    entry = kb.add("debugger", "Retries hide the timeout", anchors=[AnchorSpec("a.py", 3, 9)])
    hits = kb.search("debugger", "why does the request hang?")
"""

from typing import TYPE_CHECKING

from rag_lsp.knowledge.entries import (
    BUILTIN_MODES,
    Anchor,
    AnchorSpec,
    KnowledgeEntry,
    format_time,
    parse_time,
)

if TYPE_CHECKING:
    from rag_lsp.knowledge.store import KnowledgeBase

__all__ = [
    "BUILTIN_MODES",
    "Anchor",
    "AnchorSpec",
    "KnowledgeBase",
    "KnowledgeEntry",
    "format_time",
    "parse_time",
]


def __getattr__(name: str):
    # The store needs LanceDB (seconds to import); the entry types do not.
    if name == "KnowledgeBase":
        from rag_lsp.knowledge.store import KnowledgeBase

        return KnowledgeBase
    raise AttributeError(f"module 'rag_lsp.knowledge' has no attribute {name!r}")
