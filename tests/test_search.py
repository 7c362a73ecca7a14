"""Hybrid, vector and lexical search over a real index with the real model."""

from __future__ import annotations

import time

import pytest

from rag_lsp.config import Settings
from rag_lsp.errors import RagLspError
from rag_lsp.search import pipeline
from rag_lsp.search.ranking import score_chunks
from rag_lsp.search.results import SearchFilters
from rag_lsp.workspace import Workspace

from .conftest import indexed_sample


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, embedder):
    """Indexed once for the module: these tests only read."""
    return indexed_sample(tmp_path_factory.mktemp("search"), embedder)


QUESTIONS = [
    ("where are redirects followed?", "src/http/client.py", "follow_redirects"),
    ("how are passwords hashed and salted?", "src/auth/passwords.py", "hash_password"),
    ("evict the oldest cache entry when full", "src/cache/lru.py", "LRUCache"),
    ("how do I install this package?", "docs/guide.md", "User guide > Installation"),
]


def test_a_vague_question_below_the_answer_threshold_gets_nothing(workspace):
    """The answer threshold's price, kept visible: "how do I use it?" names nothing, and in
    this five-file workspace its best file (the guide) has 0.16 of evidence of its own against
    an answer threshold of 0.36, so hybrid search returns nothing; threshold 0 still finds the
    guide first. ("how do I install it?" sits on the line: 0.34 with the full model's query
    vector, 0.37 with the query model's.)"""
    assert workspace.search("how do I use it?").results == []
    assert workspace.search("how do I use it?", threshold=0.0).results[0].path == \
        "docs/guide.md"


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
@pytest.mark.parametrize(("question", "path", "symbol"), QUESTIONS)
def test_natural_language_question_finds_the_right_code(workspace, mode, question, path, symbol):
    # Vector mode scores on similarity alone, so it runs lower than hybrid: no threshold.
    threshold = None if mode == "hybrid" else 0.0
    top = workspace.search(question, mode=mode, top_k=3, threshold=threshold).results[0]
    assert (top.path, top.symbol) == (path, symbol)
    assert 0.0 < top.score <= 1.0
    if mode == "hybrid":
        assert top.score >= workspace.settings.threshold


def test_result_points_at_exact_lines(workspace):
    top = workspace.search("follow redirects to the Location header", top_k=1).results[0]
    lines = (workspace.root / top.path).read_text().split("\n")
    assert lines[top.start_line - 1].startswith("def follow_redirects")
    assert lines[top.end_line - 1].strip() == "raise TooManyRedirects(max_hops)"
    assert top.snippet.startswith("def follow_redirects")


def test_lexical_mode_matches_words_inside_identifiers(workspace):
    response = workspace.search("redirects", mode="lexical", top_k=3)
    assert response.mode == "lexical"
    assert response.results[0].path == "src/http/client.py"
    assert 0 < response.results[0].score <= 1  # the same calibrated scale in every mode


def test_chunks_of_one_file_merge_into_one_result(workspace):
    results = workspace.search("password", threshold=0.0, top_k=10).results
    paths = [r.path for r in results]
    assert len(paths) == len(set(paths))
    passwords = next(r for r in results if r.path == "src/auth/passwords.py")
    assert len(passwords.ranges) >= 2
    assert passwords.ranges[0].start_line == passwords.start_line
    scores = [r.score for r in passwords.ranges]
    assert scores == sorted(scores, reverse=True)  # best first, by the score shown


def test_each_range_names_its_own_chunk(workspace):
    """A list of a file's ranges labels each row by what is there, not by the best chunk."""
    results = workspace.search("password", threshold=0.0, top_k=10).results
    passwords = next(r for r in results if r.path == "src/auth/passwords.py")
    lines = (workspace.root / passwords.path).read_text().split("\n")
    assert passwords.ranges[0].symbol == passwords.symbol
    for line_range in passwords.ranges:
        chunk = lines[line_range.start_line - 1:line_range.end_line]
        assert line_range.preview == next(line.strip() for line in chunk if line.strip())
    assert len({r.preview for r in passwords.ranges}) == len(passwords.ranges)


def test_results_are_in_the_order_of_the_score_they_show(workspace):
    for question, _path, _symbol in QUESTIONS:
        scores = [r.score for r in workspace.search(question, threshold=0.0).results]
        assert scores == sorted(scores, reverse=True)


def test_results_are_capped_at_top_k(workspace):
    assert len(workspace.search("code", threshold=0.0, top_k=2).results) == 2


@pytest.mark.parametrize("question", [
    "quantum chromodynamics lattice simulation",
    "banana bread recipe",
    "who won the football world cup in 1998",
    "qzxv wplmk rrtgh jjkeo",
])
def test_nothing_relevant_returns_nothing(workspace, question):
    assert workspace.search(question).results == []  # at the default threshold
    assert workspace.search(question, threshold=0.0).results  # the candidates were there


@pytest.mark.parametrize(
    ("filters", "allowed"),
    [
        (SearchFilters(paths=("src/auth/**",)), {"src/auth/passwords.py"}),
        (SearchFilters(paths=("*.md",)), {"docs/guide.md"}),
        (SearchFilters(languages=("javascript",)), {"web/static/app.js"}),
        (SearchFilters(kinds=("class",)), {"src/cache/lru.py", "src/http/client.py"}),
    ],
)
def test_filters_restrict_results(workspace, filters, allowed):
    results = workspace.search("function", threshold=0.0, filters=filters).results
    assert results and {r.path for r in results} <= allowed


def test_filter_matching_nothing_returns_nothing(workspace):
    filters = SearchFilters(paths=("nothing/here/**",))
    response = workspace.search("password", threshold=0.0, filters=filters)
    assert response.results == []
    assert response.warnings == [  # not left to look like the threshold's doing
        f"no indexed file in {workspace.root} matches the filters (paths nothing/here/**): "
        "path filters are gitignore-style globs relative to the workspace root, e.g. `src/**`"]


@pytest.mark.parametrize("typed", [
    SearchFilters(paths=("./src/auth/**",)),
    SearchFilters(paths=("{root}/src/auth/**",)),
    SearchFilters(paths=("{link}/src/auth/**",)),  # the root typed through a link to it
    SearchFilters(paths=("{link}/src/auth/passwords.py",)),
    SearchFilters(paths=("/src/auth/**",)),  # anchored to the root, as in a .gitignore
    SearchFilters(paths=("src/auth/**",), languages=("Python",)),
])
def test_filters_as_users_type_them(workspace, typed, tmp_path):
    (tmp_path / "link").symlink_to(workspace.root, target_is_directory=True)
    paths = tuple(p.format(root=workspace.root, link=tmp_path / "link") for p in typed.paths)
    filters = SearchFilters(paths=paths, languages=typed.languages)
    response = workspace.search("hash a password", filters=filters)
    assert [r.path for r in response.results] == ["src/auth/passwords.py"]
    assert not response.warnings


@pytest.mark.parametrize(("filters", "says"), [
    (SearchFilters(languages=("cobol",)), "unknown language 'cobol' in the language filter; "
                                          "known: c, cpp, "),
    (SearchFilters(paths=("",)), "an empty path filter matches no file"),
    (SearchFilters(kinds=("struct",)), "unknown kind 'struct' in the kind filter; known: "
                                      "module, section, class"),
    (SearchFilters(paths=("src/[z-a]*",)), "the path filter `src/[z-a]*` is not a valid"),
])
def test_filters_that_cannot_match_are_refused(workspace, filters, says):
    for search in (workspace.search, lambda q, filters: workspace.find_chunks(
            q, limit=5, filters=filters)):
        with pytest.raises(RagLspError) as refused:
            search("password", filters=filters)
        assert says in str(refused.value)


def test_top_k_must_be_positive(workspace):
    with pytest.raises(RagLspError, match="top_k must be at least 1"):
        workspace.search("password", top_k=0)


def test_bad_mode_and_empty_query_say_what_is_wrong(workspace):
    with pytest.raises(RagLspError, match="not one of vector, lexical, hybrid"):
        workspace.search("x", mode="fuzzy")
    with pytest.raises(RagLspError, match="query is empty"):
        workspace.search("   ")



def test_a_one_chunk_workspace_still_answers_what_it_holds(tmp_path, embedder):
    """The noise level comes from a sample of the index; in a one-chunk index that sample is
    the answer itself, and every question used to score zero."""
    root = tmp_path / "tiny"
    root.mkdir()
    (root / "runner.py").write_text(
        "def run_with_retries(job, attempts=3, delay=0.5):\n"
        '    """Run a job, retrying failures with exponential backoff."""\n'
        "    for attempt in range(attempts):\n"
        "        try:\n"
        "            return job()\n"
        "        except Exception:\n"
        "            time.sleep(delay * 2 ** attempt)\n", encoding="utf-8")
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    assert ws.index().chunks_total == 1
    found = ws.search("retry a failing job with backoff").results
    assert [r.path for r in found] == ["runner.py"]
    assert ws.search("chocolate chip cookie recipe").results == []


def test_an_identifier_ending_in_digits_is_found_before_folders_named_with_them(tmp_path,
                                                                               embedder):
    """The one document that has ``zqc10`` comes first, not the files under ``pkg10/``."""
    root = tmp_path / "ws"
    for n in range(6):
        write = root / "pkg10" / f"mod_{n}.py"
        write.parent.mkdir(parents=True, exist_ok=True)
        write.write_text(f"def handler_{n}(request):\n    return request.body[{n}]\n", "utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "notes.md").write_text(
        "# Notes\n\nThe probe calls zqc10 once the queue drains.\n", "utf-8")
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    for mode in ("lexical", "hybrid"):
        assert ws.search("zqc10", mode=mode).results[0].path == "docs/notes.md", mode


def test_timings_say_where_a_search_spent_its_time(workspace):
    """Each part measured on its own (a query never asked before, so the model runs), and
    the parts run one after another inside the search's own time, except the lexical lookups,
    which run beside them."""
    response = workspace.search("which function follows redirects and counts the hops?")
    timings = response.timings
    assert timings.query_embedding > 0 and timings.vector > 0
    assert timings.lexical > 0 and timings.ranking > 0
    assert timings.query_embedding + timings.vector + timings.ranking < response.took_ms
    assert timings.lexical < response.took_ms
    assert set(response.to_dict()["timings"]) == {
        "query_embedding_ms", "vector_ms", "lexical_ms", "ranking_ms"}

    again = workspace.search("which function follows redirects and counts the hops?")
    assert again.timings.query_embedding < timings.query_embedding  # cached: no model call
    lexical = workspace.search("follow redirects", mode="lexical").timings
    assert lexical.query_embedding == 0 and lexical.vector == 0 and lexical.lexical > 0
    vector = workspace.search("follow redirects", mode="vector").timings
    assert vector.lexical == 0 and vector.vector > 0


def test_a_read_run_again_reports_its_own_timings_only(workspace, monkeypatch):
    """A read can run twice (the index rebuilt under it): the answer's timings are the
    second run's, not the two runs' added up or mixed."""
    index = workspace._index
    read_once = index.read
    monkeypatch.setattr(index, "read", lambda read: (read_once(read), read_once(read))[1])
    scored = []

    def slow_the_first_time(*args, **kwargs):
        scored.append(1)
        if len(scored) == 1:
            time.sleep(0.2)  # in the first run's ranking only
        return score_chunks(*args, **kwargs)

    monkeypatch.setattr(pipeline, "score_chunks", slow_the_first_time)
    response = workspace.search("where is the oldest cache entry evicted when it is full?")
    assert len(scored) == 2
    assert 0 < response.timings.ranking < 200
