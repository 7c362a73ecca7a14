"""``inject_context``: manual context first, then the mode's knowledge, then code, packed.

Precedence is the user's explicit choice (manual), then what earlier sessions learned in this
mode (knowledge; among equally relevant entries the newer wins), then code search results
reranked for the mode (see :mod:`rag_lsp.context.modes`). Nothing below the relevance
threshold is injected: an empty context is better than noise.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lsp.chunking import chunk_document
from rag_lsp.chunking.languages import language_for
from rag_lsp.chunking.types import ChunkOptions, TokenCounter
from rag_lsp.confined import read_inside, resolved
from rag_lsp.context.modes import profile_for, rerank
from rag_lsp.context.packing import ContextItem, Dropped, Packer
from rag_lsp.context.query import derive_query
from rag_lsp.errors import BadInputError
from rag_lsp.indexing.secrets import redact_secrets
from rag_lsp.lines import editor_lines
from rag_lsp.search.results import SearchFilters

if TYPE_CHECKING:  # only the type: servers import this before the engine is needed
    from rag_lsp.workspace import Workspace

log = logging.getLogger(__name__)

CANDIDATE_CHUNKS = 40  # code candidates per folder before reranking and packing
KNOWLEDGE_RESULTS = 10
DEFINITION_KINDS = ("function", "method", "class")


class BadContextRequest(BadInputError):
    """The request names something that does not exist (a file, a line range)."""


@dataclass
class ManualRef:
    path: Path  # absolute
    start_line: int | None = None  # 1-based, inclusive; None = the whole file
    end_line: int | None = None


@dataclass
class ContextRequest:
    mode: str
    token_budget: int
    query: str | None = None
    active_file: Path | None = None  # absolute
    selection: tuple[int, int] | None = None  # 1-based lines in the active file
    manual: list[ManualRef] = field(default_factory=list)
    include_knowledge: bool = True


@dataclass
class ContextResult:
    context: str
    items: list[ContextItem]
    dropped: list[Dropped]
    total_tokens: int
    budget: int
    query: str


@dataclass
class Source:
    """One workspace folder: its code index and (if any) its knowledge base."""

    workspace: Workspace
    knowledge: object | None = None  # rag_lsp.knowledge.KnowledgeBase

    def relative(self, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(self.workspace.root).as_posix()
        except (ValueError, RuntimeError, OSError):  # outside, or a loop of links (nowhere)
            return None


def _read_lines(source: Source, rel: str, what: str) -> list[str]:
    """The lines of a file :func:`_confined` found inside ``source``, read by that
    relative path: a link swapped in since is not followed out."""
    try:
        text = read_inside(source.workspace.root, rel)
    except OSError as exc:
        raise BadContextRequest(f"{what}: cannot read {rel}: {exc.strerror or exc}") from exc
    return split_lines(text)


split_lines = editor_lines  # (the name other modules and tests know)


def _locate(sources: Sequence[Source], path: Path) -> tuple[Source | None, str]:
    for source in sources:
        rel = source.relative(path)
        if rel is not None:
            return source, rel
    return None, str(path)


def _confined(sources: Sequence[Source], path: Path, what: str) -> tuple[Source, str]:
    """The folder holding ``path`` and its relative path, or a clear refusal. The path is
    resolved first (``..``, symlinks), so neither a spelling nor a link inside a folder can
    read a file elsewhere."""
    resolved(path, what)  # a loop of links is said to be one, not "outside"
    source, rel = _locate(sources, path)
    if source is None:
        roots = ", ".join(str(s.workspace.root) for s in sources) or "none open"
        raise BadContextRequest(
            f"{what}: {path}{_leads_to(path)} is outside the workspace folders ({roots}); "
            "context is only read from files inside them")
    return source, rel


def _leads_to(path: Path) -> str:
    """Where a link leads, for a message about a path that is not where it looks."""
    real = path.resolve()
    return f" (a link to {real})" if real != Path(os.path.abspath(path)) else ""


def build_context(
    sources: Sequence[Source], request: ContextRequest, counter: TokenCounter
) -> ContextResult:
    """Pack context for ``request`` from ``sources``; ``counter`` is the real tokenizer."""
    if request.token_budget < 1:
        raise BadContextRequest(f"tokenBudget must be at least 1 (got {request.token_budget})")
    packer = Packer(request.token_budget, counter.count)
    for position, ref in enumerate(request.manual):
        _add_manual(sources, ref, f"manualContext[{position}]", packer, counter)
    query = (request.query or "").strip()
    active_rel: dict[int, str] = {}
    if request.active_file is not None:
        # A file outside the workspace (a library opened from elsewhere) is never read: it
        # neither shapes the ranking nor lends its words to the query.
        source, rel = _locate(sources, request.active_file)
        if source is not None:
            active_rel[id(source)] = rel
        if not query:
            lines = _read_lines(*_confined(sources, request.active_file, "activeFile"),
                                "activeFile")
            if request.selection is not None:
                first, last = request.selection
                if not 1 <= first <= last <= len(lines):
                    raise BadContextRequest(
                        f"activeFile.selection: lines {first}-{last} are outside "
                        f"{request.active_file} ({len(lines)} lines)")
            query = derive_query("\n".join(lines), request.selection, request.mode)
    if query:
        if request.include_knowledge:
            for item in _knowledge_items(sources, request.mode, query):
                packer.add(item)
        for item in _code_items(sources, request.mode, query, active_rel):
            packer.add(item)
    context = packer.context()
    result = ContextResult(context, packer.items, packer.dropped, counter.count(context),
                           request.token_budget, query)
    _log(request.mode, result)
    return result


def _add_manual(sources: Sequence[Source], ref: ManualRef, what: str, packer: Packer,
                counter: TokenCounter) -> None:
    source, rel = _confined(sources, ref.path, what)
    lines = _read_lines(source, rel, what)
    start, end = ref.start_line or 1, ref.end_line or len(lines)
    if not (1 <= start <= end <= len(lines)):
        raise BadContextRequest(
            f"{what}: lines {start}-{end} are outside {rel} ({len(lines)} lines)")
    root = source.workspace.root
    language = language_for(rel)
    whole = ContextItem("manual", "", "\n".join(lines[start - 1:end]), rel, root,
                        start, end, language)
    if packer.is_duplicate(whole) or packer.fits(whole):
        packer.add(whole)
        return
    # Too big as one block: the chunker's pieces (definitions, sections), in file order.
    options = ChunkOptions(max_tokens=254, window_tokens=254, overlap_tokens=0, headers=False)
    for chunk in chunk_document(whole.text, language, counter, options, path=rel):
        packer.add(ContextItem("manual", chunk.symbol, chunk.text, rel, root,
                               start + chunk.start_line - 1, start + chunk.end_line - 1,
                               language))


def _knowledge_items(sources: Sequence[Source], mode: str, query: str) -> list[ContextItem]:
    entries = []
    for source in sources:
        if source.knowledge is not None and not source.workspace.degraded:
            threshold = source.workspace.settings.knowledge_threshold
            found = source.knowledge.search(mode, query, top_k=KNOWLEDGE_RESULTS,
                                            threshold=threshold)
            entries += [(source, entry) for entry in found]
    # Relevance first; among equally relevant entries (same score to 2 decimals) newest first.
    entries.sort(key=lambda pair: (round(pair[1].score or 0.0, 2), pair[1].created_at),
                 reverse=True)
    items = []
    for source, entry in entries:
        notes = []
        if entry.anchors:
            notes.append("anchored at " + ", ".join(
                f"{a.path}:L{a.start_line}-L{a.end_line}" for a in entry.anchors))
        if entry.stale:
            notes.append(f"stale: {entry.stale_reason}")
        first = entry.anchors[0] if entry.anchors else None
        items.append(ContextItem(
            "knowledge", entry.title or entry.content.split("\n", 1)[0][:80], entry.content,
            path=first.path if first else "", root=source.workspace.root,
            start_line=first.start_line if first else None,
            end_line=first.end_line if first else None,
            score=entry.score, created_at=entry.created_at, entry_id=entry.id,
            note="; ".join(notes),
        ))
    return items


def _code_items(sources: Sequence[Source], mode: str, query: str,
                active_rel: dict[int, str]) -> list[ContextItem]:
    ranked = []
    for source in sources:
        if not source.workspace.has_index():
            continue
        hits = source.workspace.find_chunks(query, limit=CANDIDATE_CHUNKS, filters=SearchFilters(
            wanted_roles=profile_for(mode).wanted_roles))
        ranked += [(adjusted, source, hit)
                   for hit, adjusted in rerank(hits, mode, active_rel.get(id(source)))]
    ranked.sort(key=lambda triple: triple[0], reverse=True)
    items = []
    taken: set[tuple[int, str, int, int]] = set()
    for _adjusted, source, hit in ranked:
        start, end, text = hit.start_line, hit.end_line, hit.text
        if hit.kind in DEFINITION_KINDS:  # a piece of a big definition: take all of it
            pieces = source.workspace.definition_pieces(hit.path, hit.symbol)
            whole = _whole_definition(source, hit.path, pieces) if len(pieces) > 1 else None
            if whole is not None:
                start, end, text = whole
        # The definition's other pieces widen to it too: one item (and one "dropped" line).
        if (key := (id(source), hit.path, start, end)) in taken:
            continue
        taken.add(key)
        items.append(ContextItem("codebase", hit.symbol, text, hit.path, source.workspace.root,
                                 start, end, hit.language, score=hit.score))
    return items


def _whole_definition(source: Source, path: str,
                      pieces: list[dict]) -> tuple[int, int, str] | None:
    """The definition the indexed ``pieces`` make up (first line, last line, its text), read
    from the file as it is now, if each piece's lines there still hold its indexed text;
    else ``None``: the file changed since it was indexed (lines put above it, or taken out
    of it), so those lines may hold other code now, and the piece alone is what is known."""
    try:
        text = read_inside(source.workspace.root, path)
    except OSError:  # gone, or now a link out of the workspace
        return None
    if source.workspace.settings.secret_filter:  # as the index has it: the whole file
        text = redact_secrets(text)  # (line count kept)
    lines = split_lines(text)
    start = min(p["start_line"] for p in pieces)
    end = max(p["end_line"] for p in pieces)
    if end > len(lines):
        return None
    # "in": a piece of one very long line is part of it.
    if not all(p["text"] in "\n".join(lines[p["start_line"] - 1:p["end_line"]])
               for p in pieces):
        return None
    return start, end, "\n".join(lines[start - 1:end])


def _log(mode: str, result: ContextResult) -> None:
    """What was injected and why, so a user can check what the assistant was shown."""
    log.info("context for %s mode: %d items, %d/%d tokens, %d dropped; query %r", mode,
             len(result.items), result.total_tokens, result.budget, len(result.dropped),
             result.query[:80])
    for item in result.items:
        score = f"score {item.score:.2f}, " if item.score is not None else ""
        log.info("  %s %s (%s%d tokens)", item.source, item.where or item.title, score,
                 item.tokens)
