"""Markdown chunks: one per H1/H2 section, keeping the heading path.

A section over the token limit is split at H3 headings, then at blank lines between
paragraphs, then by lines; fenced code blocks (and YAML front matter) stay whole unless a
single block is itself over the limit.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from rag_lsp.chunking.text_windows import DEFAULT_OPTIONS, LineTokens, Range
from rag_lsp.chunking.types import Chunk, ChunkOptions, TokenCounter

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# A line that cannot be the text of a setext heading (list item, quote, table, indented code).
_NOT_SETEXT_TEXT = re.compile(r"^(?: {4}|\t| {0,3}(?:[-*+>|]|\d{1,9}[.)])(?:[ \t]|$))")


@dataclass(frozen=True)
class Heading:
    start: int  # first line of the heading (the text line for a setext heading)
    level: int
    title: str


def find_blocks(lines: list[str]) -> list[Range]:
    """Fenced code blocks and front matter, as ranges that include their fence lines.

    An unclosed fence runs to the end of the document, as in CommonMark.
    """
    blocks: list[Range] = []
    i = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                blocks.append((0, j))
                i = j + 1
                break
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if m is None or (m.group(1)[0] == "`" and "`" in m.group(2)):
            i += 1
            continue
        fence = m.group(1)
        close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])),
                   len(lines) - 1)
        blocks.append((i, end))
        i = end + 1
    return blocks


def find_headings(lines: list[str], blocks: list[Range]) -> list[Heading]:
    """ATX and setext headings outside fenced code blocks and front matter."""
    in_block = [False] * len(lines)
    for start, end in blocks:
        for i in range(start, end + 1):
            in_block[i] = True
    headings: list[Heading] = []
    for i, line in enumerate(lines):
        if in_block[i]:
            continue
        m = _ATX.match(line)
        if m:
            title = _ATX_CLOSE.sub("", (m.group(2) or "").strip()).strip()
            headings.append(Heading(i, len(m.group(1)), title))
            continue
        s = _SETEXT.match(line)
        if (s and i > 0 and not in_block[i - 1] and lines[i - 1].strip()
                and not _NOT_SETEXT_TEXT.match(lines[i - 1])
                and not _ATX.match(lines[i - 1]) and not _SETEXT.match(lines[i - 1])
                and not (headings and headings[-1].start == i - 1)):
            # Only the line right above counts as the title; a multi-line setext
            # paragraph keeps its earlier lines in the previous section (rare).
            headings.append(Heading(i - 1, 1 if s.group(1)[0] == "=" else 2,
                                    lines[i - 1].strip()))
    return headings


def chunk_markdown(text: str, counter: TokenCounter,
                   options: ChunkOptions = DEFAULT_OPTIONS) -> list[Chunk]:
    """Chunk Markdown into heading sections (kind ``"section"``)."""
    lt = LineTokens(text, counter)
    blocks = find_blocks(lt.lines)
    headings = find_headings(lt.lines, blocks)
    block_at = dict(blocks)  # first line -> last line of each fenced block
    chunks: list[Chunk] = []
    for start, end, path, inner in _sections(len(lt), headings):
        for s, e, symbol in _pieces(lt, start, end, path, inner, options.max_tokens):
            context = lt.fit_context(symbol, options.max_tokens)
            for rs, re_ in _split(lt, s, e, lt.budget(context, options.max_tokens), block_at):
                chunks.append(lt.chunk(rs, re_, "section", symbol, context, options.max_tokens))
    return chunks


def _sections(n: int, headings: list[Heading]):
    """Yield ``(start, end, heading path, H3 headings inside)`` per H1/H2 section."""
    tops = [h for h in headings if h.level <= 2]
    starts = [0] + [h.start for h in tops]
    ends = [h.start - 1 for h in tops] + [n - 1]
    h3s = [h for h in headings if h.level == 3]
    h1 = h2 = ""
    for k, (start, end) in enumerate(zip(starts, ends, strict=True)):
        if k > 0:
            head = tops[k - 1]
            h1, h2 = (head.title, "") if head.level == 1 else (h1, head.title)
        path = " > ".join(t for t in (h1, h2) if t) if k > 0 else ""
        lo, hi = bisect_right(h3s, start, key=_start), bisect_right(h3s, end, key=_start)
        if start <= end:
            yield start, end, path, h3s[lo:hi]


def _start(heading: Heading) -> int:
    return heading.start


def _pieces(lt: LineTokens, start: int, end: int, path: str, h3s: list[Heading],
            max_tokens: int):
    """The whole section if it fits, else its parts split at H3 headings."""
    context = lt.fit_context(path, max_tokens)
    if not h3s or lt.tokens(start, end) <= lt.budget(context, max_tokens):
        yield start, end, path
        return
    bounds = [start] + [h.start for h in h3s] + [end + 1]
    symbols = [path] + [" > ".join(t for t in (path, h.title) if t) for h in h3s]
    for k, symbol in enumerate(symbols):
        if bounds[k] < bounds[k + 1]:
            yield bounds[k], bounds[k + 1] - 1, symbol


def _split(lt: LineTokens, start: int, end: int, budget: int,
           block_at: dict[int, int]) -> list[Range]:
    """Ranges within ``budget``: paragraphs first, then lines, keeping code fences whole."""
    trimmed = lt.trim(start, end)
    if trimmed is None:
        return []
    if lt.tokens(start, end) <= budget:
        return [trimmed]
    # Atoms are single lines or whole fenced blocks; paragraphs are atoms between blank lines.
    paragraphs: list[list[Range]] = []
    i = start
    while i <= end:
        if lt.blank[i]:
            paragraphs.append([(i, i)])
            i += 1
            continue
        atom = (i, min(block_at.get(i, i), end))
        if paragraphs and paragraphs[-1] and not lt.blank[paragraphs[-1][-1][1]]:
            paragraphs[-1].append(atom)
        else:
            paragraphs.append([atom])
        i = atom[1] + 1
    units: list[Range] = []
    for atoms in paragraphs:
        if lt.tokens(atoms[0][0], atoms[-1][1]) <= budget:
            units.append((atoms[0][0], atoms[-1][1]))
            continue
        for s, e in atoms:
            if lt.tokens(s, e) <= budget:
                units.append((s, e))
            else:
                # Last resort: a single fenced block over the limit is cut between its lines.
                units.extend((k, k) for k in range(s, e + 1))
    return lt.pack(units, budget)
