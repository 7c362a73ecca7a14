"""Token windows over plain text, the dispatcher, and the invariants every chunker keeps."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lsp.chunking import (
    KINDS,
    Chunk,
    ChunkOptions,
    chunk_document,
    chunk_text,
    language_for,
)
from tests.test_chunking_long_lines import check_document_chunks


def check_invariants(chunks: list[Chunk], text: str, counter, options: ChunkOptions,
                     *, disjoint: bool = True) -> None:
    """What every chunker promises (shared by the other chunking test modules)."""
    lines = text.split("\n")
    covered: set[int] = set()
    previous: Chunk | None = None
    for chunk in chunks:
        assert chunk.kind in KINDS
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        assert chunk.text == "\n".join(lines[chunk.start_line - 1:chunk.end_line])
        assert chunk.text.strip()
        tokens = counter.count(chunk.embed_text)
        # The only way over the limit: one line that alone is longer than the limit.
        assert tokens <= options.max_tokens or (
            chunk.start_line == chunk.end_line and counter.count(chunk.text) > options.max_tokens
        ), (chunk, tokens)
        if previous is not None:
            assert chunk.start_line > previous.start_line
            if disjoint:
                assert chunk.start_line > previous.end_line
        previous = chunk
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    # Nothing is lost: every non-blank line is in some chunk.
    assert {i + 1 for i, line in enumerate(lines) if line.strip()} <= covered


def words(n: int, word: str = "word") -> str:
    return " ".join([word] * n)


def ranges(chunks: list[Chunk]) -> list[tuple[int, int]]:
    return [(c.start_line, c.end_line) for c in chunks]


def test_word_lines_count_as_expected(token_counter):
    # The exact-range tests below assume these counts.
    assert token_counter.count(words(10)) == 10
    assert token_counter.count(words(10) + "\n" + words(5)) == 15


@pytest.mark.parametrize("text", ["", "\n", "   \n\t\n  ", "\n\n\n"])
def test_blank_text_gives_no_chunks(token_counter, text):
    assert chunk_text(text, token_counter) == []
    for language in ("markdown", "python", "text"):
        assert chunk_document(text, language, token_counter) == []


def test_windows_have_exact_ranges_and_overlap(token_counter):
    text = "\n".join(words(10) for _ in range(10))
    options = ChunkOptions(max_tokens=254, window_tokens=30, overlap_tokens=10)
    chunks = chunk_text(text, token_counter, options)
    # Three 10-token lines per window; the last line of each window starts the next one.
    assert ranges(chunks) == [(1, 3), (3, 5), (5, 7), (7, 9), (9, 10)]
    assert {c.kind for c in chunks} == {"text"} and {c.symbol for c in chunks} == {""}
    check_invariants(chunks, text, token_counter, options, disjoint=False)


def test_window_ends_at_blank_line_in_last_third(token_counter):
    text = "\n".join([words(10)] * 4 + [""] + [words(10)] * 4)
    options = ChunkOptions(window_tokens=50, overlap_tokens=0)
    # Without the preference the first window would be lines 1-6, cutting paragraph two.
    assert ranges(chunk_text(text, token_counter, options)) == [(1, 4), (6, 9)]


def test_blank_line_early_in_window_is_ignored(token_counter):
    text = "\n".join([words(10), ""] + [words(10)] * 6)
    options = ChunkOptions(window_tokens=50, overlap_tokens=0)
    assert ranges(chunk_text(text, token_counter, options)) == [(1, 6), (7, 8)]


def test_window_is_capped_at_max_tokens(token_counter):
    text = "\n".join(words(10) for _ in range(6))
    options = ChunkOptions(max_tokens=20, window_tokens=1000, overlap_tokens=0)
    assert ranges(chunk_text(text, token_counter, options)) == [(1, 2), (3, 4), (5, 6)]


@pytest.mark.parametrize("window,overlap", [(20, 20), (20, 500), (1, 0), (0, 0), (15, -3)])
def test_windows_always_make_progress(token_counter, window, overlap):
    text = "\n".join(words(10) for _ in range(20))
    options = ChunkOptions(max_tokens=40, window_tokens=window, overlap_tokens=overlap)
    chunks = chunk_text(text, token_counter, options)
    check_invariants(chunks, text, token_counter, options, disjoint=False)
    assert len(chunks) <= 20


def test_overlong_line_is_emitted_alone(token_counter):
    text = "\n".join([words(5), words(300), words(5)])
    options = ChunkOptions(max_tokens=50, window_tokens=50, overlap_tokens=10)
    chunks = chunk_text(text, token_counter, options)
    assert ranges(chunks) == [(1, 1), (2, 2), (3, 3)]
    check_invariants(chunks, text, token_counter, options, disjoint=False)


def test_dispatch_by_language(token_counter):
    markdown = "# Title\nbody"
    assert chunk_document(markdown, "markdown", token_counter)[0].kind == "section"
    assert chunk_document("def f():\n    pass\n", "python", token_counter)[0].kind == "function"
    assert chunk_document(markdown, "sql", token_counter)[0].kind == "text"  # no grammar
    assert chunk_document("fn f() {}\n", "rust", token_counter)[0].kind == "function"
    assert language_for("docs/README.md") == "markdown"


_ALPHABET = st.sampled_from(
    list("ab xyz 09 ") + ["\n", "\n", "\n\n", "\t", "\r", "\x0c", "\u00a0", "é", "中", "#",
                          "`", "~", "-", "=", "word ", "tokenization ", "\x1c", "\u200b"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(_ALPHABET, max_size=300).map("".join),
       max_tokens=st.integers(1, 60), window=st.integers(-5, 80), overlap=st.integers(-5, 80))
def test_windows_keep_invariants_on_random_text(token_counter, text, max_tokens, window,
                                                overlap):
    options = ChunkOptions(max_tokens=max_tokens, window_tokens=window, overlap_tokens=overlap)
    chunks = chunk_text(text, token_counter, options)
    check_invariants(chunks, text, token_counter, options, disjoint=False)
    # The dispatcher then cuts any over-long line, so every chunk fits.
    check_document_chunks(chunk_document(text, "text", token_counter, options), text,
                          token_counter, options)


@settings(max_examples=50, deadline=None)
@given(text=st.text(max_size=200))
def test_counts_are_additive_across_lines(token_counter, text):
    # The chunkers count each line once and add; this is the property they rely on.
    lines = text.split("\n")
    assert token_counter.count(text) == sum(token_counter.count(line) for line in lines)


@given(st.lists(st.text(max_size=60), max_size=12))
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_batch_of_counts_is_each_texts_count(token_counter, texts):
    """Chunking counts a document's lines in one call (one that lets searches run Python
    meanwhile); each count is the text's own, the empty one 0."""
    assert token_counter.counts(texts) == [token_counter.count(t) for t in texts]
    assert token_counter.count("") == 0 and token_counter.counts([]) == []
