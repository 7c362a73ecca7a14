"""Python chunks from the stdlib AST: module code, functions, classes and methods.

A definition's range starts at its first decorator (or at the ``#`` comment lines directly
above it) and ends at ``end_lineno``. Module-level code between definitions becomes
``"module"`` chunks. A class that fits is one chunk; a bigger one becomes class chunks for
its own lines plus one ``"method"`` chunk per method. A definition over the limit is cut
into pieces of whole lines at statement boundaries where possible, each piece carrying the
signature as its context.
"""

from __future__ import annotations

import ast
import io
import logging
import re
import tokenize
from pathlib import PurePath

from rag_lsp.chunking.text_windows import DEFAULT_OPTIONS, LineTokens, Range, chunk_text
from rag_lsp.chunking.types import Chunk, ChunkOptions, TokenCounter

log = logging.getLogger(__name__)

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Python counts a lone "\r" as a line break, text.split("\n") does not: line numbers would drift.
_LONE_CR = re.compile(r"\r(?!\n)")


def chunk_python(text: str, counter: TokenCounter, options: ChunkOptions = DEFAULT_OPTIONS,
                 *, path: str = "") -> list[Chunk]:
    """Chunk Python source by its AST; unparsable files fall back to text windows."""
    lt = LineTokens(text, counter)
    try:
        if _LONE_CR.search(text):
            raise ValueError("lone carriage-return line endings")
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        where = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
        log.warning("cannot parse %s as Python%s: %s; chunking it as plain text",
                    path or "<text>", where, exc)
        return chunk_text(text, counter, options, lines=lt)
    chunker = _PythonChunker(lt, options.max_tokens, PurePath(path).stem if path else "")
    chunker.top_level(tree.body)
    return sorted(chunker.chunks, key=lambda c: c.start_line)


class _PythonChunker:
    def __init__(self, lt: LineTokens, max_tokens: int, module: str):
        self.lt = lt
        self.max_tokens = max_tokens
        self.module = module
        self.chunks: list[Chunk] = []

    def top_level(self, body: list[ast.stmt]) -> None:
        def emit_def(node: ast.stmt, start: int) -> None:
            if isinstance(node, ast.ClassDef):
                self.class_def(node, start)
            else:
                self.definition(node, start, "function", node.name, "")

        self.members(body, _DEFS, 0, len(self.lt) - 1, emit_def, "module", self.module, "")

    def members(self, body, def_types, start: int, end: int, emit_def, gap_kind: str,
                symbol: str, gap_context: str) -> None:
        """Hand each definition in ``body`` to ``emit_def``; chunk the lines between them."""
        gap_start, between = start, []
        for node in body:
            if not isinstance(node, def_types):
                between.append(node)
                continue
            def_start = self.attached_start(node, gap_start)
            self.gap(gap_start, def_start - 1, between, gap_kind, symbol, gap_context)
            emit_def(node, def_start)
            gap_start, between = node.end_lineno, []  # end_lineno: 0-based line after the def
        self.gap(gap_start, end, between, gap_kind, symbol, gap_context)

    def attached_start(self, node: ast.stmt, floor: int) -> int:
        """0-based first line of a definition: decorators and comment lines right above it."""
        start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        while start - 1 >= floor and self.lt.lines[start - 1].lstrip().startswith("#"):
            start -= 1
        return start

    def gap(self, start: int, end: int, stmts, kind: str, symbol: str, context: str) -> None:
        """Chunk lines ``start..end`` between definitions (module code or a class's own)."""
        if self.lt.trim(start, end) is not None:
            self.emit(start, end, stmts, kind, symbol, context)

    def class_def(self, node: ast.ClassDef, start: int) -> None:
        end = node.end_lineno - 1
        if self.lt.tokens(start, end) <= self.max_tokens:
            self.add(start, end, "class", node.name, "")
            return
        header = self.signature_context(node)

        def emit_method(method: ast.stmt, method_start: int) -> None:
            self.definition(method, method_start, "method", f"{node.name}.{method.name}",
                            header, self.signature_context(method, header))

        # Nested classes are not split out: they stay in the class's own chunks.
        self.members(node.body, _FUNCS, start, end, emit_method, "class", node.name, header)

    def definition(self, node: ast.stmt, start: int, kind: str, symbol: str,
                   context: str, piece_context: str | None = None) -> None:
        """One chunk for the definition if it fits, else pieces with the signature as context."""
        end = node.end_lineno - 1
        if self.lt.tokens(start, end) <= self.lt.budget(context, self.max_tokens):
            self.add(start, end, kind, symbol, context)
            return
        if piece_context is None:
            piece_context = self.signature_context(node)
        self.emit(start, end, [node], kind, symbol, piece_context)

    def emit(self, start: int, end: int, stmts, kind: str, symbol: str, context: str) -> None:
        budget = self.lt.budget(context, self.max_tokens)
        for s, e in self.lt.pack(self.units(start, end, stmts, budget), budget):
            self.add(s, e, kind, symbol, context)

    def units(self, start: int, end: int, stmts, budget: int) -> list[Range]:
        """Contiguous ranges covering ``start..end``: one per statement that fits, nested
        statements of one that does not, and single lines for everything else."""
        out: list[Range] = []
        line = start
        for node in stmts:
            first, last = _span(node)
            first, last = max(first, line), min(last, end)
            if last < first:
                continue  # several statements on one line
            out.extend((i, i) for i in range(line, first))
            if self.lt.tokens(first, last) <= budget:
                out.append((first, last))
            else:
                out.extend(self.units(first, last, _children(node), budget))
            line = last + 1
        out.extend((i, i) for i in range(line, end + 1))
        return out

    def add(self, start: int, end: int, kind: str, symbol: str, context: str) -> None:
        trimmed = self.lt.trim(start, end)
        if trimmed is not None:
            self.chunks.append(self.lt.chunk(*trimmed, kind, symbol, context, self.max_tokens))

    def signature_context(self, node: ast.stmt, prefix: str = "") -> str:
        """``prefix`` + the signature; cut to its first line, then to ``prefix``, if too long."""
        signature = self.signature(node)
        for candidate in (signature, signature.split("\n")[0]):
            context = f"{prefix}\n{candidate}" if prefix else candidate
            if self.lt.fit_context(context, self.max_tokens):
                return context
        return prefix

    def signature(self, node: ast.stmt) -> str:
        """The ``def``/``class`` line(s) up to the colon that opens the body."""
        first = node.lineno - 1
        last = min(node.body[0].lineno - 1, node.end_lineno - 1)
        source = "\n".join(self.lt.lines[first:last + 1])
        depth = 0
        try:
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.type == tokenize.OP and tok.string in "([{":
                    depth += 1
                elif tok.type == tokenize.OP and tok.string in ")]}":
                    depth -= 1
                elif tok.type == tokenize.OP and tok.string == ":" and depth == 0:
                    last = first + tok.end[0] - 1
                    break
        except (tokenize.TokenError, SyntaxError):
            last = first
        return "\n".join(line.strip() for line in self.lt.lines[first:last + 1])


def _children(node: ast.AST) -> list[ast.AST]:
    """Statements nested directly in a compound statement, in source order."""
    out: list[ast.AST] = []
    for field in ("body", "handlers", "orelse", "finalbody", "cases"):
        for child in getattr(node, field, None) or []:
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                out.append(child)
    return sorted(out, key=lambda n: _span(n)[0])


def _span(node: ast.AST) -> Range:
    """0-based first and last line of a statement, decorators included."""
    if isinstance(node, ast.match_case):  # has no position of its own
        return node.pattern.lineno - 1, node.body[-1].end_lineno - 1
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return first - 1, node.end_lineno - 1
