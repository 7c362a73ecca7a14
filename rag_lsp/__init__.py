"""rag-lsp: local semantic + lexical retrieval over a workspace."""

from typing import TYPE_CHECKING

from rag_lsp.search.results import SearchFilters, SearchResponse, SearchResult
from rag_lsp.store.deferred_imports import defer_lance_rest_client

# Before anything imports lancedb: a client it loads and never uses here, deferred (-1.3 s).
defer_lance_rest_client()

if TYPE_CHECKING:
    from rag_lsp.workspace import Workspace, WorkspaceStatus

__all__ = ["SearchFilters", "SearchResponse", "SearchResult", "Workspace", "WorkspaceStatus"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # The engine (LanceDB, onnxruntime: seconds to import) loads on first use, so the servers
    # can answer their handshake before it has.
    if name in ("Workspace", "WorkspaceStatus"):
        from rag_lsp import workspace

        return getattr(workspace, name)
    raise AttributeError(f"module 'rag_lsp' has no attribute {name!r}")
