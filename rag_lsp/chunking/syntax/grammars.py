"""Which tree-sitter grammar parses which file, loaded from the per-language grammar wheels.

Each grammar is its own PyPI wheel with the compiled parser inside (``tree-sitter-go``…), so
nothing is fetched at run time — unlike the "language pack" wheels, which download parsers on
first use. A grammar is loaded on first need; a missing or broken wheel makes its files fall
back to plain-text windows (with one log line), never an indexing failure.
"""

from __future__ import annotations

import importlib
import logging
import threading
from pathlib import PurePath

log = logging.getLogger(__name__)

# grammar name -> (module, function returning the language pointer)
_GRAMMAR_MODULES: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
    "php": ("tree_sitter_php", "language_php"),
    "kotlin": ("tree_sitter_kotlin", "language"),
    "swift": ("tree_sitter_swift", "language"),
    "scala": ("tree_sitter_scala", "language"),
    "lua": ("tree_sitter_lua", "language"),
    "bash": ("tree_sitter_bash", "language"),
}

# Where the file's language (``language_for``) is parsed by another grammar.
_GRAMMAR_BY_LANGUAGE = {"shell": "bash"}
# C++ headers are often named .h; the C++ grammar reads C headers as well.
_GRAMMAR_BY_SUFFIX = {".tsx": "tsx", ".jsx": "javascript", ".h": "cpp"}

_lock = threading.Lock()
_languages: dict[str, object | None] = {}
_local = threading.local()  # a Parser is not thread-safe: one per thread and grammar


def grammar_for(language: str, path: str = "") -> str | None:
    """The grammar that parses a file of ``language`` at ``path``; None if there is none."""
    suffix = PurePath(path).suffix.lower() if path else ""
    name = _GRAMMAR_BY_SUFFIX.get(suffix) or _GRAMMAR_BY_LANGUAGE.get(language, language)
    return name if name in _GRAMMAR_MODULES else None


def supported_grammars() -> tuple[str, ...]:
    return tuple(_GRAMMAR_MODULES)


def load_language(grammar: str):
    """The tree-sitter ``Language`` for ``grammar``, or None if its wheel cannot be loaded."""
    with _lock:
        if grammar not in _languages:
            _languages[grammar] = _load(grammar)
        return _languages[grammar]


def _load(grammar: str):
    module_name, function = _GRAMMAR_MODULES[grammar]
    try:
        from tree_sitter import Language

        module = importlib.import_module(module_name)
        return Language(getattr(module, function)())
    except Exception as exc:  # a broken or missing wheel: that language is chunked as text
        log.warning("cannot load the tree-sitter grammar for %s (%s: %s); its files are "
                    "chunked as plain text. Reinstall rag-lsp to restore it.",
                    grammar, type(exc).__name__, exc)
        return None


def parser_for(grammar: str):
    """A parser for ``grammar`` owned by the calling thread, or None."""
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    if grammar not in parsers:
        language = load_language(grammar)
        if language is None:
            parsers[grammar] = None
        else:
            from tree_sitter import Parser

            parsers[grammar] = Parser(language)
    return parsers[grammar]
