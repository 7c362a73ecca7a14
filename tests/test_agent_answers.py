"""Agent-sized search answers: locations first, numbered snippets, a hard token cap that
drops snippets before files and says what it left out."""

from __future__ import annotations

from pathlib import Path

from rag_lsp.agents.answers import context_answer, estimate_tokens, search_answer
from rag_lsp.context.builder import ContextResult
from rag_lsp.context.packing import ContextItem, Dropped
from rag_lsp.search.results import LineRange, SearchResponse, SearchResult


def _result(n: int, lines: int = 12) -> SearchResult:
    body = "\n".join(f"    statement_{n}_{i} = compute({i})" for i in range(lines))
    return SearchResult(
        path=f"src/module_{n}.py", start_line=10 * n + 1, end_line=10 * n + lines,
        score=0.9 - n / 100, kind="function", symbol=f"handler_{n}", language="python",
        ranges=[LineRange(10 * n + 1, 10 * n + lines, 0.9), LineRange(400, 420, 0.5)],
        snippet=f"def handler_{n}():\n{body}\n…")


def _response(count: int) -> SearchResponse:
    return SearchResponse("where are handlers", "hybrid", 12.0,
                          [_result(n) for n in range(count)])


def test_locations_symbols_and_numbered_snippets():
    text = search_answer(_response(2), max_tokens=2000, snippet_lines=3)
    blocks = text.split("\n\n")
    assert blocks[0] == "2 files for 'where are handlers', best first (hybrid search, 12 ms):"
    assert blocks[1].split("\n") == [
        "src/module_0.py:1-12  handler_0 (function)  score 0.90",
        "  also: 400-420",
        "  1  def handler_0():",
        "  2      statement_0_0 = compute(0)",
        "  3      statement_0_1 = compute(1)",
    ]


def test_the_cap_drops_snippets_first_then_files_and_says_so():
    full = search_answer(_response(10), max_tokens=50_000, snippet_lines=8)
    assert "Left out" not in full and full.count("compute(") == 70
    capped = search_answer(_response(10), max_tokens=400, snippet_lines=8)
    assert estimate_tokens(capped) <= 400
    assert capped.count("src/module_") == 10  # every location is still there
    assert 0 < capped.count("def handler_") < 10  # the best files keep their code
    assert "def handler_0" in capped and "def handler_9" not in capped
    assert "Left out to stay within max_tokens=400: the code of" in capped
    tiny = search_answer(_response(10), max_tokens=100, snippet_lines=8)
    assert estimate_tokens(tiny) <= 100 and "more files" in tiny


def test_no_results_say_so_and_long_lines_are_cut():
    empty = SearchResponse("qzx", "hybrid", 3.0, [])
    assert search_answer(empty, max_tokens=2000, snippet_lines=8).startswith(
        "No relevant code found for 'qzx'")
    wide = _result(0)
    wide.snippet = "x = '" + "a" * 5000 + "'"
    text = search_answer(SearchResponse("q", "hybrid", 1.0, [wide]), max_tokens=2000,
                         snippet_lines=8)
    assert len(max(text.split("\n"), key=len)) < 200


def _item(tokens: int, where: str) -> ContextItem:
    path, lines = where.split(":L")
    start, end = (int(n) for n in lines.split("-L"))
    item = ContextItem("codebase", "f", "def f(): ...", path, Path("/ws"), start, end, "python")
    item.tokens = tokens
    return item


def test_context_that_did_not_fit_says_what_budget_would():
    # Found but too big is not "nothing relevant": the agent is told the budget to ask for.
    dropped = [Dropped(_item(640, "src/a.py:L1-L80"), "budget"),
               Dropped(_item(180, "src/b.py:L3-L20"), "budget"),
               Dropped(_item(90, "src/c.py:L1-L9"), "duplicate")]
    text = context_answer(ContextResult("", [], dropped, 0, 150, "q"), "debugger", "q")
    assert text == ("Nothing fits token_budget 150: 2 relevant item(s) were found, the "
                    "smallest 180 tokens; ask again with token_budget 200 or more.")
    nothing = context_answer(ContextResult("", [], [], 0, 150, "q"), "debugger", "q",
                             note="(being built)")
    assert nothing == ("(being built)\nNothing relevant to 'q' in the workspace or the "
                       "debugger knowledge base.")
    kept = _item(60, "src/d.py:L1-L5")
    some = context_answer(ContextResult("ctx", [kept], dropped[:1], 60, 150, "q"), "debugger",
                          "q")
    assert some.startswith("debugger context for 'q': 60 of 150 tokens, 1 codebase item(s); "
                           "1 more did not fit (src/a.py:L1-L80)")
