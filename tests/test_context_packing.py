"""Packing never exceeds the budget by the server's own count and never cuts an item
(property tests with hypothesis, the real tokenizer and a real index)."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rag_lsp.context.builder import ContextRequest, ManualRef, Source, build_context
from rag_lsp.context.packing import SAFETY_MARGIN, ContextItem, Packer, render
from rag_lsp.context.query import derive_query
from tests.conftest import SAMPLE_FILES, indexed_sample, make_sample_root

SNIPPETS = [textwrap.dedent(body).strip() for body in SAMPLE_FILES.values()] + [
    "x = 1", "```\nnested fence\n```", "ünïcödé ✓ 日本語", "a" * 3000,
]

items = st.builds(
    ContextItem,
    source=st.sampled_from(["manual", "knowledge", "codebase"]),
    title=st.text(max_size=30),
    text=st.one_of(st.sampled_from(SNIPPETS), st.text(min_size=1, max_size=400)),
    path=st.sampled_from(["", "a.py", "b/c.md", "d.js"]),
    start_line=st.integers(1, 50),
    end_line=st.integers(50, 120),
    language=st.sampled_from(["python", "markdown", ""]),
    score=st.one_of(st.none(), st.floats(-1, 1)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(candidates=st.lists(items, max_size=12), budget=st.integers(1, 4000))
def test_packer_never_exceeds_the_budget_and_never_cuts(token_counter, candidates, budget):
    packer = Packer(budget, token_counter.count)
    for item in candidates:
        packer.add(item)
    context = packer.context()
    assert token_counter.count(context) <= budget * (1 - SAFETY_MARGIN)
    assert len(packer.items) + len(packer.dropped) == len(candidates)
    for item in packer.items:
        assert render(item) in context and item.text in context  # whole, never cut
    for i, kept in enumerate(packer.items):
        assert not any(kept.overlaps(other) for other in packer.items[i + 1:])


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, embedder):
    return indexed_sample(tmp_path_factory.mktemp("packing"), embedder)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(budget=st.integers(1, 8000),
       mode=st.sampled_from(["debugger", "security", "performance", "planning", "other"]),
       query=st.sampled_from(["password hashing", "follow redirects", "how to deploy",
                              "cache eviction", "debounce in the browser"]),
       manual=st.booleans())
# Found by hypothesis: the manual file does not fit 65 tokens, a small chunk does.
@example(budget=65, mode="debugger", query="how to deploy", manual=True)
def test_built_context_fits_every_budget(indexed, token_counter, budget, mode, query, manual):
    request = ContextRequest(mode=mode, token_budget=budget, query=query)
    if manual:
        request.manual.append(ManualRef(indexed.root / "src/http/client.py"))
    result = build_context([Source(indexed)], request, token_counter)
    assert result.total_tokens == token_counter.count(result.context) <= budget
    assert sum(i.tokens for i in result.items) == result.total_tokens
    for item in result.items:
        if item.source == "codebase":
            lines = (indexed.root / item.path).read_text().splitlines()
            whole = "\n".join(lines[item.start_line - 1:item.end_line])
            assert whole in result.context  # the chunk's lines, all of them
    if manual:  # manual context goes first, or was dropped for not fitting the budget
        dropped_manual = [d for d in result.dropped if d.item.source == "manual"]
        assert (result.items and result.items[0].source == "manual") or dropped_manual


def test_a_query_is_derived_from_a_selection():
    text = textwrap.dedent(SAMPLE_FILES["src/http/client.py"])
    query = derive_query(text, (14, 16), "debugger")
    assert query.startswith("def follow_redirects")
    assert "raise TooManyRedirects" in query


def test_a_cursor_on_the_line_after_the_final_newline_derives_a_query():
    # An editor numbers that empty line (a cursor at the end of the file sits on it).
    text = "def retry(job):\n    raise ValueError(job)\n"
    assert derive_query(text, (3, 3), "debugger").startswith("def retry(job):")


def _long_definition_workspace(root, embedder):
    from rag_lsp.config import Settings
    from rag_lsp.workspace import Workspace

    root = make_sample_root(root)
    body = "\n".join(f"    hops_{i} = follow_location_header(response, {i})" for i in range(40))
    (root / "src/http.py").write_text(
        f"def follow_redirects(response):\n{body}\n    return response\n")
    ws = Workspace.open(root, Settings.from_dict({"chunkTokens": 64, "chunkOverlapTokens": 8}),
                        embedder=embedder)
    ws.index()
    return ws


def test_context_reads_a_whole_definition_only_inside_the_workspace(tmp_path, embedder,
                                                                    token_counter):
    ws = _long_definition_workspace(tmp_path / "ws", embedder)
    request = ContextRequest(mode="debugger", token_budget=4000, query="follow redirects")
    whole = build_context([Source(ws)], request, token_counter)
    assert "return response" in whole.context  # a piece was widened to its definition

    outside = tmp_path / "outside.py"
    outside.write_text("\n".join(f"SECRET_{i} = 'hunter2'" for i in range(60)) + "\n")
    (ws.root / "src/http.py").rename(ws.root / "src/http.bak")
    (ws.root / "src/http.py").symlink_to(outside)  # swapped in after indexing
    swapped = build_context([Source(ws)], request, token_counter)
    assert "hunter2" not in swapped.context
    assert "follow_location_header" in swapped.context  # the indexed piece still serves

    (ws.root / "src/http.py").unlink()  # deleted, not yet re-indexed: the piece, no error
    gone = build_context([Source(ws)], request, token_counter)
    assert "follow_location_header" in gone.context


def test_a_definition_in_many_pieces_is_one_item_packed_or_dropped_once(tmp_path, embedder,
                                                                       token_counter):
    """Each piece widened to the same definition was an item of its own: 13 "dropped"
    lines for one definition too large, or 12 "duplicate" ones once it was packed."""
    ws = _long_definition_workspace(tmp_path / "ws", embedder)
    spans = {(i.path, i.start_line, i.end_line) for i in ws.find_chunks(
        "follow redirects location header", limit=40) if i.symbol == "follow_redirects"}
    assert len(spans) > 2  # the definition is indexed in pieces

    def defined(items):
        return [i for i in items if i.path == "src/http.py" and i.start_line == 1]
    packed = build_context([Source(ws)], ContextRequest(
        mode="debugger", token_budget=4000, query="follow redirects"), token_counter)
    assert len(defined(packed.items)) == 1 and defined(d.item for d in packed.dropped) == []
    small = build_context([Source(ws)], ContextRequest(
        mode="debugger", token_budget=200, query="follow redirects"), token_counter)
    assert defined(small.items) == []
    assert len(defined(d.item for d in small.dropped)) == 1, small.dropped


def test_a_definition_is_not_widened_over_lines_that_changed_since_indexing(tmp_path,
                                                                           embedder,
                                                                           token_counter):
    """Lines put above it after indexing: the definition's indexed range held other code,
    which was packed under its name and range."""
    ws = _long_definition_workspace(tmp_path / "ws", embedder)
    http = ws.root / "src/http.py"
    http.write_text("import os\nimport sys\nSECOND = 2\n" + http.read_text())
    result = build_context([Source(ws)], ContextRequest(
        mode="debugger", token_budget=4000, query="follow redirects"), token_counter)
    pieces = [i for i in result.items if i.path == "src/http.py"]
    assert pieces and all("import sys" not in i.text for i in pieces), pieces
    assert all("follow_location_header" in i.text for i in pieces)  # the indexed pieces


def test_lines_ended_by_a_lone_cr_are_numbered_as_the_index_numbers_them(tmp_path, embedder,
                                                                         token_counter):
    """Classic Mac line ends: the index (and editors) count three lines; manual context
    counted one and refused lines 2-3."""
    from rag_lsp.config import Settings
    from rag_lsp.workspace import Workspace

    root = make_sample_root(tmp_path / "ws")
    (root / "cr.txt").write_bytes(b"line one\rline two\rline three\r")
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    result = build_context([Source(ws)], ContextRequest(
        mode="debugger", token_budget=4000, query="line two",
        manual=[ManualRef(root / "cr.txt", 2, 3)]), token_counter)
    (manual,) = [i for i in result.items if i.source == "manual"]
    assert (manual.start_line, manual.end_line, manual.text) == (2, 3, "line two\nline three")


def test_a_selection_after_a_form_feed_derives_its_query_from_its_own_lines():
    """splitlines broke at the form feed (old C and Python sources hold them): every line
    after it was one off from the editor's."""
    text = "import os\n\x0c\ndef retry(job):\n    return job.run()\n"
    assert derive_query(text, (3, 4), "debugger").startswith("def retry(job):")


def test_a_definition_is_not_widened_over_lines_taken_out_of_it_since_indexing(
        tmp_path, embedder, token_counter):
    """Lines taken out of its end, other code after it: the first piece still matched its
    own lines, and the definition's indexed range took in the other code."""
    ws = _long_definition_workspace(tmp_path / "ws", embedder)
    http = ws.root / "src/http.py"
    lines = http.read_text().split("\n")
    cut = lines[:30] + lines[36:-1]  # 6 lines of the body gone
    other = [f"def unrelated_helper_{i}():\n    return {i}\n" for i in range(4)]
    http.write_text("\n".join(cut) + "\n" + "\n".join(other))
    result = build_context([Source(ws)], ContextRequest(
        mode="debugger", token_budget=4000, query="follow redirects"), token_counter)
    pieces = [i for i in result.items if i.path == "src/http.py"]
    assert pieces and all("unrelated_helper" not in i.text for i in pieces), pieces
