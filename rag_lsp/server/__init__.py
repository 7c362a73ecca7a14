"""The language server (pygls wiring only): ``rag-lsp serve`` runs it over stdio."""

from rag_lsp.server.app import RagServer
from rag_lsp.server.main import build_server, serve_stdio

__all__ = ["RagServer", "build_server", "serve_stdio"]
