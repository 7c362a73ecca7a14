"""Lines longer than the model's limit are cut into pieces the model reads in full."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lsp.chunking import Chunk, ChunkOptions, chunk_document
from rag_lsp.chunking.long_lines import split_long_lines

OPTIONS = ChunkOptions(max_tokens=64, window_tokens=64, overlap_tokens=8)


def check_document_chunks(chunks, text, counter, options):
    """chunk_document's promise: every chunk fits; text is whole lines or a slice of one."""
    lines = text.split("\n")
    # Nothing is dropped: every line with words is covered by some chunk.
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert all(n in covered for n, line in enumerate(lines, start=1) if line.strip()), chunks
    for chunk in chunks:
        assert counter.count(chunk.embed_text) <= options.max_tokens, chunk
        whole = "\n".join(lines[chunk.start_line - 1:chunk.end_line])
        if chunk.text != whole:
            assert chunk.start_line == chunk.end_line
            assert chunk.text in whole and chunk.text.strip()


def test_long_paragraph_is_cut_into_pieces_that_cover_it(token_counter):
    paragraph = " ".join(f"sentence{i} about retrieval." for i in range(80))
    text = f"Title line\n{paragraph}\ntrailing line"
    chunks = chunk_document(text, "text", token_counter, OPTIONS)
    check_document_chunks(chunks, text, token_counter, OPTIONS)
    pieces = [c for c in chunks if c.start_line == c.end_line == 2]
    assert len(pieces) >= 3
    assert " ".join(p.text for p in pieces).split() == paragraph.split()  # nothing dropped


def test_markdown_piece_keeps_its_heading_context(token_counter):
    text = "# Guide\n\n" + "word " * 200
    chunks = chunk_document(text, "markdown", token_counter, OPTIONS)
    check_document_chunks(chunks, text, token_counter, OPTIONS)
    assert len(chunks) >= 3
    assert all(c.context == "Guide" and c.symbol == "Guide" for c in chunks if c.start_line == 3)


def test_a_single_huge_word_is_cut_by_characters(token_counter):
    blob = "a1b2c3d4" * 400  # no whitespace at all, like a minified or base64 line
    chunks = chunk_document(blob, "javascript", token_counter, OPTIONS)
    check_document_chunks(chunks, blob, token_counter, OPTIONS)
    assert "".join(c.text for c in chunks) == blob


def test_short_lines_are_untouched(token_counter):
    text = "def f():\n    return 1\n"
    [chunk] = chunk_document(text, "python", token_counter, OPTIONS)
    assert chunk.text == "def f():\n    return 1"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=60),
            st.builds(lambda n, w: " ".join([w] * n), st.integers(0, 300),
                      st.sampled_from(["tok", "naïve", "x_y", "長い"])),
        ),
        max_size=8,
    ),
    st.sampled_from(["text", "markdown", "python"]),
)
def test_every_chunk_fits_whatever_the_lines(token_counter, lines, language):
    text = "\n".join(lines)
    chunks = chunk_document(text, language, token_counter, OPTIONS)
    check_document_chunks(chunks, text, token_counter, OPTIONS)


def test_a_huge_run_without_spaces_is_cut_into_exact_pieces(token_counter):
    blob = "".join(f"a{i}=b.c({i});" for i in range(30_000))  # ~400 KB, no whitespace
    chunk = Chunk(1, 1, "text", blob)
    pieces = split_long_lines([chunk], token_counter, 254)
    assert "".join(p.text for p in pieces) == blob
    assert all(token_counter.count(p.embed_text) <= 254 for p in pieces)


def test_pieces_fit_even_where_word_counts_do_not_add_up(token_counter):
    # The tokenizer drops the form feed and joins "a" with "tokenization": 6 tokens, not 5.
    chunk = Chunk(1, 1, "text", "a中a\x0ctokenization")
    pieces = split_long_lines([chunk], token_counter, 5)
    assert all(token_counter.count(p.embed_text) <= 5 for p in pieces)
    assert "".join(p.text for p in pieces) == chunk.text
