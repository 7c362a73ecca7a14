"""rag-lsp: local semantic + lexical retrieval over a workspace."""

from rag_lsp.search.results import SearchFilters, SearchResponse, SearchResult
from rag_lsp.workspace import Workspace, WorkspaceStatus

__all__ = ["SearchFilters", "SearchResponse", "SearchResult", "Workspace", "WorkspaceStatus"]
__version__ = "0.1.0"
