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


def _longest_prefix(word: str, budget: int, counter: TokenCounter) -> int:
    """Length of the longest prefix of ``word`` within ``budget`` tokens (at least 1)."""
    low, high = 1, len(word)
    while low < high:
        mid = (low + high + 1) // 2
        if counter.count(word[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def _spans(line: str, budget: int, counter: TokenCounter) -> list[tuple[int, int]]:
    """Character spans of ``line`` whose token counts each fit ``budget``."""
    spans: list[tuple[int, int]] = []
    start, used = 0, 0
    for match in _WORD.finditer(line):
        word_start, word_end = match.span()
        tokens = counter.count(match.group())
        if used and used + tokens > budget:
            spans.append((start, word_start))
            start, used = word_start, 0
        while tokens > budget:  # one "word" longer than the budget: cut it by characters
            cut = word_start + _longest_prefix(line[word_start:word_end], budget, counter)
            if cut > start:
                spans.append((start, cut))
            start = word_start = cut
            tokens = counter.count(line[word_start:word_end])
        used += tokens
    if line[start:].strip():
        spans.append((start, len(line)))
    return spans


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
