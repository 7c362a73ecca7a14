"""Markdown sections: headings, heading paths, fences, and splitting long sections."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lsp.chunking import ChunkOptions, chunk_document
from rag_lsp.chunking.markdown import chunk_markdown
from tests.test_chunking_long_lines import check_document_chunks
from tests.test_chunking_text import check_invariants, ranges, words


def sections(chunks):
    return [(c.start_line, c.end_line, c.symbol) for c in chunks]


def test_sections_by_h1_h2_with_heading_path(token_counter):
    text = "\n".join([
        "Intro line.",        # 1
        "",
        "# Install",          # 3
        "Some text.",
        "",
        "## From source",     # 6
        "Build it.",
        "# Usage",            # 8
        "Run it.",
        "## Flags ##",        # 10: closing hashes are not part of the title
        "--verbose",
        "",
    ])
    chunks = chunk_markdown(text, token_counter)
    assert sections(chunks) == [
        (1, 1, ""), (3, 4, "Install"), (6, 7, "Install > From source"), (8, 9, "Usage"),
        (10, 11, "Usage > Flags"),
    ]
    assert [c.context for c in chunks] == [c.symbol for c in chunks]
    assert {c.kind for c in chunks} == {"section"}
    check_invariants(chunks, text, token_counter, ChunkOptions())


def test_h2_without_h1_and_h3_does_not_start_a_section(token_counter):
    text = "## Alone\ntext\n### Deeper\nmore\n#hashtag is not a heading"
    assert sections(chunk_markdown(text, token_counter)) == [(1, 5, "Alone")]


def test_hash_lines_inside_fences_are_not_headings(token_counter):
    text = "\n".join([
        "# Title",            # 1
        "```bash",
        "# a shell comment",
        "## not a heading",
        "```",
        "~~~~",               # 6
        "# inside tildes",
        "~~~",                # shorter closing fence: still inside
        "# still inside",
        "~~~~~",              # 10: longer closing fence closes
        "## Real",            # 11
        "text",
        "````",               # 13: unclosed fence runs to the end
        "# never a heading",
    ])
    assert sections(chunk_markdown(text, token_counter)) == [
        (1, 10, "Title"), (11, 14, "Title > Real"),
    ]


def test_indented_hash_is_code_not_heading(token_counter):
    text = "# Top\n    # indented code\ntext"
    assert sections(chunk_markdown(text, token_counter)) == [(1, 3, "Top")]


def test_setext_headings_and_front_matter(token_counter):
    text = "\n".join([
        "---",                # 1: front matter, its lines are not setext headings
        "title: x",
        "---",
        "Guide",              # 4
        "=====",
        "intro",
        "",
        "---",                # 8: after a blank line this is a rule, not a heading
        "Part two",           # 9
        "--------",
        "- item",
        "---",                # 12: under a list item this is a rule
    ])
    assert sections(chunk_markdown(text, token_counter)) == [
        (1, 3, ""), (4, 8, "Guide"), (9, 12, "Guide > Part two"),
    ]


def test_long_section_splits_at_h3(token_counter):
    text = "\n".join([
        "# Guide",            # 1
        "## Setup",           # 2
        words(20),
        "### Linux",          # 4
        words(20),
        "### Mac",            # 6
        words(20),
        "## Next",            # 8
        words(5),
    ])
    options = ChunkOptions(max_tokens=40)
    chunks = chunk_markdown(text, token_counter, options)
    assert sections(chunks) == [
        (1, 1, "Guide"),
        (2, 3, "Guide > Setup"),
        (4, 5, "Guide > Setup > Linux"),
        (6, 7, "Guide > Setup > Mac"),
        (8, 9, "Guide > Next"),
    ]
    assert chunks[2].context == "Guide > Setup > Linux"
    check_invariants(chunks, text, token_counter, options)


def test_long_section_splits_at_paragraphs_then_lines(token_counter):
    text = "\n".join([
        "# Notes",            # 1
        words(10),
        words(10),
        "",
        words(20),            # 5
        "",
        words(25),            # 7: a paragraph over the budget is cut between lines
        words(25),
    ])
    options = ChunkOptions(max_tokens=40)  # the context "Notes" costs 1 token
    chunks = chunk_markdown(text, token_counter, options)
    assert ranges(chunks) == [(1, 3), (5, 5), (7, 7), (8, 8)]
    assert {c.context for c in chunks} == {"Notes"}
    check_invariants(chunks, text, token_counter, options)


def test_fenced_block_is_not_split_when_it_fits(token_counter):
    text = "\n".join([
        "# Code",             # 1
        words(20),
        "```python",          # 3
        words(10),
        "",                   # a blank line inside the fence is not a paragraph break
        words(10),
        "```",                # 7
        words(20),
    ])
    options = ChunkOptions(max_tokens=40)
    chunks = chunk_markdown(text, token_counter, options)
    assert ranges(chunks) == [(1, 2), (3, 7), (8, 8)]
    check_invariants(chunks, text, token_counter, options)


def test_oversized_fence_is_split_by_lines_as_last_resort(token_counter):
    text = "\n".join(["# Big", "```"] + [words(15)] * 6 + ["```"])
    options = ChunkOptions(max_tokens=40)
    chunks = chunk_markdown(text, token_counter, options)
    assert len(chunks) > 1
    check_invariants(chunks, text, token_counter, options)


def test_huge_heading_path_is_not_used_as_context(token_counter):
    text = f"# {words(30)}\n{words(10)}\n\n{words(10)}"
    options = ChunkOptions(max_tokens=40)
    chunks = chunk_markdown(text, token_counter, options)
    assert chunks[0].symbol == words(30) and chunks[0].context == ""
    check_invariants(chunks, text, token_counter, options)


_MD_LINES = st.sampled_from([
    "", "", "# Title", "## Sub", "### Deep", "Setext", "===", "---", "```", "~~~", "````py",
    "    # code", "- item", "> quote", words(3), words(12), words(40), "| a | b |", "#",
])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_MD_LINES, max_size=60), max_tokens=st.integers(1, 80))
def test_markdown_keeps_invariants(token_counter, lines, max_tokens):
    text = "\n".join(lines)
    options = ChunkOptions(max_tokens=max_tokens)
    chunks = chunk_markdown(text, token_counter, options)
    check_invariants(chunks, text, token_counter, options)
    assert {c.kind for c in chunks} <= {"section"}
    check_document_chunks(chunk_document(text, "markdown", token_counter, options), text,
                          token_counter, options)
