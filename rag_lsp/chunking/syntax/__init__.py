"""Chunking by syntax tree (tree-sitter) for the languages in ``tables.py``."""

from rag_lsp.chunking.syntax.chunker import chunk_syntax
from rag_lsp.chunking.syntax.grammars import grammar_for, supported_grammars

__all__ = ["chunk_syntax", "grammar_for", "supported_grammars"]
