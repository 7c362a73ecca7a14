"""Answers sized for an agent: locations first, a few lines of code each, under a token cap.

An agent pays for every token it reads, so a search answer is a list of ``path:start-end``
lines (symbol, kind, score), each followed by a short numbered snippet while the cap allows,
never whole files. When the cap is reached, snippets go first (lowest ranked first), then
whole results, and the answer says what was left out and how to get it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_lsp.context.packing import SAFETY_MARGIN
from rag_lsp.knowledge.entries import KnowledgeEntry
from rag_lsp.search.results import SearchResponse, SearchResult

if TYPE_CHECKING:
    from rag_lsp.context.builder import ContextResult

CHARS_PER_TOKEN = 4  # a common estimate for code and English across agents' tokenizers
MAX_LINE_CHARS = 160  # longer snippet lines are cut (a minified line must not fill the cap)
MAX_ENTRY_CHARS = 1200  # knowledge entries longer than this are shown cut
MAX_QUERY_ECHO = 80  # characters of the query repeated in a context answer's first line


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def lines(start: int, end: int) -> str:
    return f"{start}-{end}" if end != start else str(start)


def location(path: str, start: int, end: int) -> str:
    return f"{path}:{lines(start, end)}"


def _result_header(result: SearchResult) -> str:
    what = " ".join(p for p in (result.symbol, f"({result.kind})" if result.kind else "") if p)
    header = f"{location(result.path, result.start_line, result.end_line)}  {what}".rstrip()
    header += f"  score {result.score:.2f}"
    more = [lines(r.start_line, r.end_line) for r in result.ranges[1:6]]
    if more:
        extra = len(result.ranges) - 1 - len(more)
        header += "\n  also: " + ", ".join(more) + (f" (+{extra} more)" if extra > 0 else "")
    return header


def _snippet(result: SearchResult, lines: int) -> str:
    if lines <= 0:
        return ""
    text = [line for line in result.snippet.split("\n") if line != "…"][:lines]
    while text and not text[-1].strip():
        text.pop()
    width = len(str(result.start_line + len(text)))
    shown = []
    for number, line in enumerate(text, start=result.start_line):
        line = line.rstrip()
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + " …"
        shown.append(f"  {number:>{width}}  {line}")
    return "\n".join(shown)


def search_answer(response: SearchResponse, *, max_tokens: int, snippet_lines: int,
                  notes: Sequence[str] = ()) -> str:
    """The text an agent reads for a search (see the module docstring)."""
    head = [*notes, *response.warnings]
    results = response.results
    if not results:
        head.append(f"No relevant code found for {response.query!r}. Nothing in the workspace "
                    "answers it well enough (the threshold and answerThreshold settings); try "
                    "other words or a symbol name.")
        return "\n".join(head)
    head.append(f"{len(results)} file{'s' if len(results) != 1 else ''} for "
                f"{response.query!r}, best first ({response.mode} search, "
                f"{response.took_ms:.0f} ms):")
    budget = max_tokens - estimate_tokens("\n".join(head)) - 30  # room for the last note
    headers = [_result_header(r) for r in results]
    kept = 0
    for header in headers:
        cost = estimate_tokens(header) + 1
        if cost > budget:
            break
        budget -= cost
        kept += 1
    snippets = [""] * kept
    cut_snippets = 0
    for i in range(kept):
        snippet = _snippet(results[i], snippet_lines)
        if not snippet:
            continue
        cost = estimate_tokens(snippet) + 1
        if cost <= budget:
            snippets[i] = snippet
            budget -= cost
        else:
            cut_snippets += 1
    blocks = ["\n".join(p for p in (headers[i], snippets[i]) if p) for i in range(kept)]
    left_out = []
    if cut_snippets:
        left_out.append(f"the code of {cut_snippets} file{'s' if cut_snippets > 1 else ''}")
    if kept < len(results):
        left_out.append(f"{len(results) - kept} more file{'s' if len(results) - kept > 1 else ''}")
    tail = ([f"(Left out to stay within max_tokens={max_tokens}: {' and '.join(left_out)}; "
             "raise max_tokens to see them.)"] if left_out else [])
    return "\n\n".join(["\n".join(head), *blocks, *tail])


def entry_text(entry: KnowledgeEntry) -> str:
    """One knowledge entry: id, date, title, anchors, staleness, content (cut if long)."""
    title = entry.title or entry.content.strip().split("\n", 1)[0][:80]
    lines = [f"[{entry.id}] {entry.created_at}  {title}"]
    if entry.score is not None:
        lines[0] += f"  score {entry.score:.2f}"
    if entry.tags:
        lines.append("  tags: " + ", ".join(entry.tags))
    if entry.anchors:
        lines.append("  about: " + ", ".join(
            location(a.path, a.start_line, a.end_line) for a in entry.anchors))
    if entry.stale:
        lines.append(f"  STALE: {entry.stale_reason or 'the code it points at changed'}")
    content = entry.content.strip()
    if len(content) > MAX_ENTRY_CHARS:
        content = content[:MAX_ENTRY_CHARS] + " … (cut)"
    lines.extend("  " + line for line in content.split("\n"))
    return "\n".join(lines)


def context_answer(result: ContextResult, mode: str, query: str, note: str = "", *,
                   budget: int | None = None) -> str:
    """The text an agent reads for packed context: what it holds, what did not fit, then the
    context itself. When nothing fit the budget, how large a budget would have. ``budget``:
    the caller's, when the context was packed into less (to leave room for this text)."""
    head = [note] if note else []
    budget = result.budget if budget is None else budget
    if len(query) > MAX_QUERY_ECHO:  # the agent knows its query: enough to tell which
        query = query[:MAX_QUERY_ECHO] + "…"
    left_out = [d for d in result.dropped if d.reason == "budget"]
    if not result.items and left_out:
        smallest = min(d.item.tokens for d in left_out)
        needed = math.ceil(smallest / (1 - SAFETY_MARGIN))  # the packer keeps a margin free
        needed += budget - result.budget  # (the room this text takes)
        return "\n".join([*head, f"Nothing fits token_budget {budget}: "
                          f"{len(left_out)} relevant item(s) were found, the smallest "
                          f"{smallest} tokens; ask again with token_budget {needed} or more."])
    if not result.items:
        return "\n".join([*head, f"Nothing relevant to {query!r} in the workspace or the "
                                  f"{mode} knowledge base."])
    kinds: dict[str, int] = {}
    for item in result.items:
        kinds[item.source] = kinds.get(item.source, 0) + 1
    summary = (f"{mode} context for {query!r}: {result.total_tokens} of {budget} "
               "tokens, " + ", ".join(f"{n} {k}" for k, n in kinds.items()) + " item(s)")
    if left_out:
        summary += (f"; {len(left_out)} more did not fit ("
                    + ", ".join(d.item.where or d.item.title for d in left_out[:5]) + ")")
    return "\n".join([*head, summary, "", result.context])
