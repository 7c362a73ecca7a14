"""Structural chunks from a tree-sitter syntax tree, for every language in ``tables.py``.

The same model as the Python chunker: a definition that fits is one chunk (with the comment
and attribute lines directly above it); a type too big for one chunk becomes chunks of its
own lines plus one chunk per member, qualified (``Router.handle``); a function too big is cut
at statement boundaries, each piece carrying its signature as context; the code between
definitions (imports, constants, top-level statements) is packed into ``module`` chunks, so
small neighbours are grouped rather than emitted one line each.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import PurePath

from rag_lsp.chunking.long_lines import looks_minified
from rag_lsp.chunking.syntax import names
from rag_lsp.chunking.syntax.grammars import parser_for
from rag_lsp.chunking.syntax.tables import CONTAINER_KINDS, TABLES, LanguageTable, Rule
from rag_lsp.chunking.text_windows import LineTokens, Range
from rag_lsp.chunking.types import Chunk, ChunkOptions, TokenCounter

log = logging.getLogger(__name__)

# Past this (or lines averaging over 400 characters) a file is data or minified code:
# structure would not help, parsing would cost.
MAX_SYNTAX_BYTES = 2_000_000
MAX_DEPTH = 64  # nesting followed when splitting; deeper nodes are cut by lines
_BODY_SUFFIXES = ("body", "block", "declaration_list", "body_statement", "class_body",
                  "template_body", "field_declaration_list")
_CHUNK_KIND = {"class": "class", "module": "module", "namespace": "module",
               "function": "function", "method": "method", "constant": "constant"}


@dataclass(frozen=True)
class _Definition:
    outer: object  # the statement in its container (``export …``, decorators included)
    node: object  # the definition itself
    kind: str  # a table kind (see tables.py)
    symbol: str
    member_qualifier: str


@dataclass(frozen=True)
class _Scope:
    gap_kind: str  # kind of the chunks between definitions
    gap_symbol: str
    context: str  # embedded with every chunk of the scope (a class's signature)
    qualifier: str  # prefix of member symbols
    in_class: bool = False
    top: bool = True  # module level: declarations there are constants


def chunk_syntax(text: str, grammar: str, counter: TokenCounter, options: ChunkOptions,
                 *, path: str = "") -> list[Chunk] | None:
    """Chunks of ``text`` by its syntax, or None when it should be chunked as plain text
    (no table or grammar, minified or huge, or the parser gave up)."""
    table = TABLES.get(grammar)
    parser = parser_for(grammar) if table is not None else None
    if parser is None:
        return None
    if len(text) > MAX_SYNTAX_BYTES or looks_minified(text):
        log.debug("%s looks minified or is too big to parse; chunking it as plain text",
                  path or "<text>")
        return None
    try:
        tree = parser.parse(text.encode("utf-8", "replace"))
    except (ValueError, RuntimeError) as exc:
        log.debug("cannot parse %s as %s (%s); chunking it as plain text", path, grammar, exc)
        return None
    if tree.root_node.has_error:
        log.debug("%s has syntax errors; its broken parts are chunked by lines", path)
    lt = LineTokens(text, counter)
    chunker = _SyntaxChunker(lt, table, options.max_tokens)
    stem = PurePath(path).stem if path else ""
    chunker.container(tree.root_node.named_children, 0, len(lt) - 1,
                      _Scope("module", stem, "", ""), 0)
    chunks = sorted(chunker.chunks, key=lambda c: (c.start_line, c.end_line))
    return _fold_closers(chunks, lt, options.max_tokens)


# Lines that only close what came before: ``}``, ``});``, ``end``.
_CLOSER = re.compile(r"^[\s\])};,)]*(?:end\b[\s;,)]*)*$")


def _fold_closers(chunks: list[Chunk], lt: LineTokens, max_tokens: int) -> list[Chunk]:
    """Fold a chunk that only closes a block (a type's last ``}``) into the chunk before it.
    Alone it would be a junk result whose embedding is all header and signature."""
    out: list[Chunk] = []
    for chunk in chunks:
        previous = out[-1] if out else None
        if (previous is not None and _CLOSER.match(chunk.text)
                and lt.trim(previous.end_line, chunk.start_line - 2) is None
                and lt.tokens(previous.start_line - 1, chunk.end_line - 1)
                + lt.counter.count(previous.context) <= max_tokens):
            out[-1] = lt.chunk(previous.start_line - 1, chunk.end_line - 1, previous.kind,
                               previous.symbol, previous.context, max_tokens)
            continue
        out.append(chunk)
    return out


def _is_import(value) -> bool:
    """``require('x')`` / ``import('x')``: an import, not a constant."""
    function = value.child_by_field_name("function") if value is not None else None
    return function is not None and function.text in (b"require", b"import")


def _rows(node) -> Range:
    """0-based first and last line of a node (a node ending with its newline ends before)."""
    (first, _), (last, column) = node.start_point, node.end_point
    if column == 0 and last > first:
        last -= 1
    return first, last


def _body(node):
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    for child in reversed(node.named_children):
        if child.type.endswith(_BODY_SUFFIXES):
            return child
    return None


class _SyntaxChunker:
    def __init__(self, lt: LineTokens, table: LanguageTable, max_tokens: int):
        self.lt = lt
        self.table = table
        self.max_tokens = max_tokens
        self.chunks: list[Chunk] = []
        self._attached = table.comments | table.attributes

    # ---- finding definitions -----------------------------------------------------------

    def find(self, outer, node, scope: _Scope, depth: int = 0) -> _Definition | None:
        rule = self.table.definitions.get(node.type)
        if rule is not None:
            found = self.read(outer, node, rule, scope)
            if found is not None:
                return found
        if node.type in self.table.wrappers and depth < 4:
            for child in node.named_children:
                if child.type in self.table.definitions or child.type in self.table.wrappers:
                    return self.find(outer, child, scope, depth + 1)
        return None

    def read(self, outer, node, rule: Rule, scope: _Scope) -> _Definition | None:
        kind = rule.kind
        if rule.needs_body and _body(node) is None:
            return None
        if rule.by_value is not None:
            value = names.value_of(node)
            kind = rule.by_value.get(value.type) if value is not None else None
            if kind is None:
                if not (rule.else_constant and scope.top) or _is_import(value):
                    return None
                kind = "constant"
        if rule.name == "receiver":
            receiver = names.receiver_type(node)
            name = names.default_name(node)
            symbol = f"{receiver}.{name}" if receiver else name
            return _Definition(outer, node, kind, symbol, symbol)
        if rule.name == "impl":
            symbol, qualifier = names.impl_names(node)
            return _Definition(outer, node, kind, symbol, qualifier)
        if rule.name in ("declarator", "assignment"):
            name = names.bound_name(node)
        else:
            name = names.default_name(node)
        if kind == "namespace":
            return _Definition(outer, node, kind, scope.gap_symbol, scope.qualifier)
        symbol = f"{scope.qualifier}.{name}" if scope.qualifier and name else name
        return _Definition(outer, node, kind, symbol, symbol)

    # ---- walking a container -----------------------------------------------------------

    def container(self, children, start: int, end: int, scope: _Scope, depth: int) -> None:
        """Hand each definition among ``children`` to :meth:`definition`; pack what lies
        between them (lines ``start..end``) into the scope's gap chunks."""
        gap_start, between, constants = start, [], []
        for i, child in enumerate(children):
            first, last = _rows(child)
            found = self.find(child, child, scope) if first >= gap_start else None
            if found is None or found.kind == "constant":
                between.append(child)
                if found is not None:
                    constants.append((first, last, found.symbol))
                continue
            def_start = self.attached_start(children, i, gap_start)
            self.gap(gap_start, def_start - 1, between, scope, constants)
            self.definition(found, def_start, scope, depth)
            gap_start, between, constants = last + 1, [], []
        self.gap(gap_start, end, between, scope, constants)

    def attached_start(self, children, index: int, floor: int) -> int:
        """First line of a definition: with the comments and attributes right above it."""
        first = _rows(children[index])[0]
        for prev in reversed(children[:index]):
            if prev.type not in self._attached:
                break
            p_first, p_last = _rows(prev)
            # A ``/** doc */`` block is often set off by one blank line (JSDoc above
            # ``a.b = function``); other comments there are about what comes before.
            gap = first - 1 - p_last
            doc_block = gap == 1 and self.lt.blank[p_last + 1] and prev.text.startswith(b"/**")
            if (gap > 0 and not doc_block) or p_first < floor or not self.starts_line(prev):
                break
            first = p_first
        return first

    def starts_line(self, node) -> bool:
        row, column = node.start_point
        return not self.lt.lines[row].encode("utf-8", "replace")[:column].strip()

    def gap(self, start: int, end: int, stmts, scope: _Scope, constants) -> None:
        if self.lt.trim(start, end) is None:
            return
        budget = self.lt.budget(scope.context, self.max_tokens)
        for s, e in self.lt.pack(self.units(start, end, stmts, budget, 0), budget):
            kind, symbol = scope.gap_kind, scope.gap_symbol
            # A constant that fills at least half of the chunk names it (also each piece of
            # a constant too big for one chunk).
            overlapping = [c for c in constants if c[0] <= e and s <= c[1]]
            if len(overlapping) == 1:
                first, last, name = overlapping[0]
                if 2 * (min(e, last) - max(s, first) + 1) >= e - s + 1:
                    kind, symbol = "constant", name
            self.add(s, e, kind, symbol, scope.context)

    def definition(self, found: _Definition, start: int, scope: _Scope, depth: int) -> None:
        end = _rows(found.outer)[1]
        kind = _CHUNK_KIND[found.kind]
        if kind == "function" and scope.in_class:
            kind = "method"
        if self.lt.tokens(start, end) <= self.lt.budget(scope.context, self.max_tokens):
            self.add(start, end, kind, found.symbol, scope.context)
            return
        if found.kind in CONTAINER_KINDS and depth < MAX_DEPTH:
            body = _body(found.node)
            if body is None and found.kind == "namespace":
                body = found.node  # ``#ifdef`` blocks hold their members directly
            if body is not None:
                header = "" if found.kind == "namespace" else self.signature_context(found.node)
                inner = _Scope(kind, found.symbol, header, found.member_qualifier,
                               in_class=found.kind == "class",
                               top=scope.top and found.kind != "class")
                self.container(body.named_children, start, end, inner, depth + 1)
                return
        context = self.signature_context(found.node, scope.context)
        budget = self.lt.budget(context, self.max_tokens)
        for s, e in self.lt.pack(self.units(start, end, [found.outer], budget, 0), budget):
            self.add(s, e, kind, found.symbol, context)

    # ---- sizing ------------------------------------------------------------------------

    def units(self, start: int, end: int, nodes, budget: int, depth: int) -> list[Range]:
        """Contiguous ranges covering ``start..end``: one per node that fits, the children
        of one that does not, and single lines for everything else."""
        out: list[Range] = []
        line = start
        for node in nodes:
            first, last = _rows(node)
            first, last = max(first, line), min(last, end)
            if last < first:
                continue  # several nodes on one line
            out.extend((i, i) for i in range(line, first))
            if self.lt.tokens(first, last) <= budget:
                out.append((first, last))
            elif depth < MAX_DEPTH and node.named_child_count:
                out.extend(self.units(first, last, node.named_children, budget, depth + 1))
            else:
                out.extend((i, i) for i in range(first, last + 1))
            line = last + 1
        out.extend((i, i) for i in range(line, end + 1))
        return out

    def add(self, start: int, end: int, kind: str, symbol: str, context: str) -> None:
        trimmed = self.lt.trim(start, end)
        if trimmed is not None:
            self.chunks.append(self.lt.chunk(*trimmed, kind, symbol, context, self.max_tokens))

    def signature_context(self, node, prefix: str = "") -> str:
        """``prefix`` + the definition's signature; cut to its first line, then to
        ``prefix``, if too long."""
        signature = self.signature(node)
        for candidate in (signature, signature.split("\n")[0]):
            context = f"{prefix}\n{candidate}" if prefix else candidate
            if candidate and self.lt.fit_context(context, self.max_tokens):
                return context
        return prefix

    @staticmethod
    def signature(node) -> str:
        """The definition's text up to where its body starts (its first line if none)."""
        source = node.text
        body = _body(node)
        if body is not None and body.start_byte > node.start_byte:
            source = source[: body.start_byte - node.start_byte]
        else:
            source = source.split(b"\n", 1)[0]
        lines = [line.strip() for line in source.decode("utf-8", "replace").split("\n")]
        return "\n".join(line for line in lines if line)
