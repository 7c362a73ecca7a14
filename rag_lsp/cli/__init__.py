"""The ``rag-lsp`` command line."""

from rag_lsp.cli.main import main

__all__ = ["main"]
