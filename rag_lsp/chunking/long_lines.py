"""Splitting lines that alone exceed the model's token limit.

Chunkers work in whole lines, so a line longer than ``max_tokens`` (an unwrapped paragraph,
a minified bundle, a data blob) would become one chunk the model silently truncates: all but
its first ~254 word-pieces would be invisible to vector search. Here such a chunk becomes
consecutive pieces of that one line, cut at whitespace (at characters only when a single
"word" is itself too long). Each piece's range is that line; its text is an exact slice.
"""

from __future__ import annotations

import re
from dataclasses import replace

from rag_lsp.chunking.text_windows import context_budget, fit_context
from rag_lsp.chunking.types import Chunk, TokenCounter

_WORD = re.compile(r"\S+\s*")
# A "word" longer than this is cut blindly into slices of this size before the exact cut, so
# a megabyte without a space (minified code, a data blob) costs linear time, not quadratic.
_SLICE_CHARS = 2048
# Code (not prose) whose lines average more than this many characters is minified or data:
# no structure to find, and hours of embedding for one file. Prose can have long paragraphs.
MINIFIED_CHARS_PER_LINE = 400
MINIFIED_MIN_CHARS = 20_000
PROSE_LANGUAGES = frozenset({"markdown", "text", "rst"})


def looks_minified(text: str, language: str = "") -> bool:
    """True for minified code or one-line data: lines averaging over 400 characters."""
    if language in PROSE_LANGUAGES or len(text) <= MINIFIED_MIN_CHARS:
        return False
    return len(text) / (text.count("\n") + 1) > MINIFIED_CHARS_PER_LINE


def _longest_prefix(word: str, budget: int, counter: TokenCounter,
                    guess: int = _SLICE_CHARS) -> int:
    """Length of the longest prefix of ``word`` within ``budget`` tokens (at least 1);
    ``guess`` is about how many characters the last such prefix had."""
    prefix_chars = getattr(counter, "prefix_chars", None)
    if prefix_chars is None:  # a counter without offsets: binary search by counting
        return _search_prefix(word, budget, counter)
    # Token offsets give the cut in one encoding of a window a little longer than the last
    # cut (tokenizing is the cost), not a search over the whole word.
    window = word[:max(64, guess + guess // 4)]
    while True:
        cut = prefix_chars(window, budget)
        if cut < len(window) or len(window) == len(word):
            break
        window = word[:2 * len(window)]  # the window held fewer tokens than the budget
    # A head cut mid-word can tokenize differently: step back until it fits.
    tokens = budget
    while cut > 1 and counter.count(word[:cut]) > budget:
        tokens -= 1
        cut = prefix_chars(window, tokens) if tokens > 0 else 1
    return max(1, cut)


def _search_prefix(word: str, budget: int, counter: TokenCounter) -> int:
    low, high = 1, len(word)
    while low < high:
        mid = (low + high + 1) // 2
        if counter.count(word[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def _count(text: str, budget: int, counter: TokenCounter) -> int:
    """Tokens in ``text``; past ``_SLICE_CHARS`` characters just "over ``budget``" (it will
    be cut anyway), so a huge run without spaces is never counted whole."""
    return counter.count(text) if len(text) <= _SLICE_CHARS else budget + 1


def _spans(line: str, budget: int, counter: TokenCounter) -> list[tuple[int, int]]:
    """Character spans of ``line`` whose token counts each fit ``budget``."""
    spans: list[tuple[int, int]] = []
    start, used, guess = 0, 0, _SLICE_CHARS
    for match in _WORD.finditer(line):
        word_start, word_end = match.span()
        tokens = _count(match.group(), budget, counter)
        if used and used + tokens > budget:
            spans.append((start, word_start))
            start, used = word_start, 0
        while tokens > budget:  # one "word" longer than the budget: cut it by characters
            head = _longest_prefix(line[word_start:word_end], budget, counter, guess)
            cut, guess = word_start + head, head
            if cut > start:
                spans.append((start, cut))
            start = word_start = cut
            tokens = _count(line[word_start:word_end], budget, counter)
        used += tokens
    if line[start:].strip():
        spans.append((start, len(line)))
    return _recount(line, spans, budget, counter)


def _recount(line: str, spans: list[tuple[int, int]], budget: int,
             counter: TokenCounter) -> list[tuple[int, int]]:
    """Spans cut again where their real count is over ``budget``: word counts do not always
    add up (the tokenizer drops control characters such as form feeds and then joins the
    words around them)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        while end - start > 1 and counter.count(line[start:end]) > budget:
            cut = start + _longest_prefix(line[start:end], budget, counter)
            out.append((start, cut))
            start = cut
        out.append((start, end))
    return out


def split_long_lines(chunks: list[Chunk], counter: TokenCounter, max_tokens: int) -> list[Chunk]:
    """Replace each over-limit single-line chunk by pieces that fit; others pass through."""
    out: list[Chunk] = []
    for chunk in chunks:
        if chunk.start_line != chunk.end_line or counter.count(chunk.embed_text) <= max_tokens:
            out.append(chunk)
            continue
        context = fit_context(counter, chunk.context, max_tokens)
        budget = context_budget(counter, context, max_tokens)
        for begin, end in _spans(chunk.text, budget, counter):
            piece = chunk.text[begin:end].rstrip()
            if piece.strip():
                out.append(replace(chunk, text=piece, context=context))
    return out
