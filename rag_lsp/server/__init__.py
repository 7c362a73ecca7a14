"""The language server (pygls wiring only): ``rag-lsp serve`` runs it over stdio
(``main.serve_stdio``). Nothing is imported here: ``early_answer`` must load without pygls."""
