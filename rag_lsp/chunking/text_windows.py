"""Token windows over whole lines, and the line-range helpers every chunker shares.

Every chunker works on 0-based line indices into ``text.split("\\n")`` and turns ranges
into :class:`Chunk` objects only at the end, so a chunk's text is always exactly its lines.
Sizes come from one model-token count per line: the tokenizer splits on whitespace, so the
count of several lines (or of ``context + "\\n" + text``) is the sum of their counts.

The one way a chunk here can exceed ``max_tokens``: a single line that alone is over the
limit. Chunks are whole lines, so such a line is emitted by itself; ``chunk_document`` then
cuts it into pieces (see ``long_lines.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from rag_lsp.chunking.types import Chunk, ChunkOptions, TokenCounter

Range = tuple[int, int]  # 0-based, inclusive line indices
DEFAULT_OPTIONS = ChunkOptions()  # frozen, so sharing one default is safe


def fit_context(counter: TokenCounter, context: str, max_tokens: int) -> str:
    """The context, or ``""`` when it would eat more than half of the budget."""
    return context if counter.count(context) <= max_tokens // 2 else ""


def context_budget(counter: TokenCounter, context: str, max_tokens: int) -> int:
    """Tokens left for text next to ``context``; at least 1, so packing always progresses."""
    return max(1, max_tokens - counter.count(context))


class LineTokens:
    """The lines of one document with their token counts and prefix sums."""

    def __init__(self, text: str, counter: TokenCounter):
        self.counter = counter
        self.lines = text.split("\n")
        self.blank = [not line.strip() for line in self.lines]
        self._prefix = [0]
        # blank lines too: Python and the tokenizer may disagree
        for tokens in counter.counts(self.lines):
            self._prefix.append(self._prefix[-1] + tokens)

    def __len__(self) -> int:
        return len(self.lines)

    def tokens(self, start: int, end: int) -> int:
        """Tokens in lines ``start..end`` (inclusive); 0 for an empty range."""
        return self._prefix[end + 1] - self._prefix[start] if end >= start else 0

    def trim(self, start: int, end: int) -> Range | None:
        """The range without leading/trailing blank lines; ``None`` if nothing is left."""
        while start <= end and self.blank[start]:
            start += 1
        while end >= start and self.blank[end]:
            end -= 1
        return (start, end) if start <= end else None

    def fit_context(self, context: str, max_tokens: int) -> str:
        return fit_context(self.counter, context, max_tokens)

    def budget(self, context: str, max_tokens: int) -> int:
        return context_budget(self.counter, context, max_tokens)

    def chunk(self, start: int, end: int, kind: str, symbol: str = "", context: str = "",
              max_tokens: int | None = None) -> Chunk:
        """A chunk of lines ``start..end``; drops the context if only that breaks the limit."""
        if context and max_tokens is not None:
            tokens = self.tokens(start, end)
            if tokens <= max_tokens < tokens + self.counter.count(context):
                context = ""
        text = "\n".join(self.lines[start:end + 1])
        return Chunk(start + 1, end + 1, kind, text, symbol, context)

    def pack(self, units: Iterable[Range], budget: int) -> list[Range]:
        """Greedily join consecutive, contiguous ``units`` into trimmed ranges within ``budget``.

        A unit over the budget on its own is emitted alone; callers make sure only single
        lines can be that big.
        """
        out: list[Range] = []
        current: Range | None = None
        for start, end in units:
            if current is not None and self.tokens(current[0], end) <= budget:
                current = (current[0], end)
                continue
            if current is not None:
                out.append(current)
            current = (start, end)
        if current is not None:
            out.append(current)
        return [r for r in (self.trim(s, e) for s, e in out) if r is not None]


def window_ranges(lt: LineTokens, options: ChunkOptions) -> list[Range]:
    """Overlapping windows of whole lines, each within the window size."""
    window = max(1, min(options.window_tokens, options.max_tokens))
    overlap = max(0, min(options.overlap_tokens, window // 2))
    n = len(lt)
    out: list[Range] = []
    start = 0
    while True:
        while start < n and lt.blank[start]:
            start += 1
        if start >= n:
            return out
        end = start  # always take the first line, however big
        while end + 1 < n and lt.tokens(start, end + 1) <= window:
            end += 1
        if end + 1 < n:
            end = _prefer_blank_end(lt, start, end, window)
        trimmed = lt.trim(start, end)
        if trimmed is not None:
            out.append(trimmed)
        if end + 1 >= n:
            return out
        start = _next_start(lt, start, end, overlap, window)


def _prefer_blank_end(lt: LineTokens, start: int, end: int, window: int) -> int:
    """End before the last blank line in the window's last third, if there is one."""
    for k in range(end, start, -1):
        if lt.tokens(start, k) < window * 2 // 3:
            break
        if lt.blank[k] and not lt.blank[k - 1]:
            return k - 1
    return end


def _next_start(lt: LineTokens, start: int, end: int, overlap: int, window: int) -> int:
    """The earliest line after ``start`` that repeats at most ``overlap`` tokens of the last
    window and still leaves room for the next new line, so every window adds something."""
    new_line = end + 1
    for s in range(start + 1, new_line):
        repeated = lt.tokens(s, end)
        if repeated <= overlap and repeated + lt.tokens(new_line, new_line) <= window:
            return s
    return new_line


def chunk_text(text: str, counter: TokenCounter, options: ChunkOptions = DEFAULT_OPTIONS,
               lines: LineTokens | None = None) -> list[Chunk]:
    """Split any text into overlapping token windows (kind ``"text"``)."""
    lt = lines or LineTokens(text, counter)
    return [lt.chunk(s, e, "text") for s, e in window_ranges(lt, options)]
