"""The ranking layer's parts on their own: query reading, file roles, path and definition
evidence, term coverage, calibration and file aggregation (no model, no index)."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

from rag_lsp.chunking.definitions import defined_names
from rag_lsp.search import evidence
from rag_lsp.search.calibration import PRIOR_SIMILARITY, PRIOR_WEIGHT, build_background
from rag_lsp.search.evidence import (
    PathMatcher,
    TermCoverage,
    defines_name,
    path_match,
    reexports_name,
    stem_is_name,
)
from rag_lsp.search.pipeline import query_cohesion, query_support
from rag_lsp.search.query import analyze
from rag_lsp.search.ranking import (
    Candidate,
    RankContext,
    RankingWeights,
    answerable,
    order_ranges,
    rank_files,
    score_chunks,
    squash,
    unsquash,
)
from rag_lsp.search.results import SearchFilters
from rag_lsp.search.roles import is_reexport_chunk, path_roles
from rag_lsp.terms import query_terms, split_identifier, stem, text_terms


def test_identifiers_split_and_words_stem_alike():
    assert split_identifier("parseHTTPResponse_v2") == ["parse", "HTTP", "Response", "v", "2"]
    assert stem("register") == stem("registered") == stem("registering") == stem("registers")
    assert stem("dependencies") == stem("dependency")
    assert "redirect" in text_terms("def follow_redirects(response):")
    assert query_terms("Where are the redirects followed?") == ["redirect", "follow"]


@pytest.mark.parametrize(("query", "identifier_query", "identifiers"), [
    ("Depends", True, ("Depends",)),
    ("field_validator", True, ("field_validator",)),
    ("application", True, ("application",)),
    ("Router.handle", True, ("handle", "Router.handle")),
    ("serde::Serialize", True, ("Serialize", "serde::Serialize")),
    ("where are redirects followed?", False, ()),
    ("how does ClientSession reuse connections", False, ("ClientSession",)),
])
def test_query_type(query, identifier_query, identifiers):
    q = analyze(query)
    assert q.identifier_query is identifier_query
    assert q.identifiers == identifiers


def test_full_text_query_gets_identifier_parts():
    assert analyze("VitestProject").fulltext == "VitestProject vitest project"
    assert analyze("where are redirects followed?").fulltext == "where are redirects followed?"


@pytest.mark.parametrize(("query", "asks"), [
    ("where are the tests for the parser", {"test"}),
    ("test runner worker pool", set()),  # a testing framework's own code
    ("documentation generation for man pages", set()),
    ("what does the README say about installing", {"docs"}),
    ("examples of middleware", {"example"}),
    ("pydantic's internal schema generation", {"internal"}),
    ("the benchmark of the router", {"benchmark"}),
    ("the e2e test of the login page", {"test"}),
    ("how does the workbench lay out panels", set()),  # a word that only holds "bench"
])
def test_queries_that_ask_for_a_role(query, asks):
    assert analyze(query).asks_for == asks


@pytest.mark.parametrize(("path", "roles"), [
    ("src/client.py", set()),
    ("tests/test_client.py", {"test"}),
    ("pkg/router_test.go", {"test"}),
    ("src/app.spec.ts", {"test"}),
    ("docs/guide.md", {"docs"}),
    ("doc/md_docs.go", set()),  # code that generates docs is code
    ("CHANGELOG.rst", {"docs"}),
    ("examples/basic/main.py", {"example"}),
    ("docs_src/tutorial001.py", {"example"}),
    ("pydantic/v1/main.py", {"legacy"}),
    ("pydantic/deprecated/json.py", {"legacy"}),
    ("api/service_pb2.py", {"generated"}),
    ("types/index.d.ts", {"generated"}),
    ("vendor/github.com/x/y.go", {"generated"}),
    ("models/reference/vectors.json", {"data"}),
    (".github/labeler.yml", {"data"}),
    ("pydantic/_internal/_fields.py", {"internal"}),
    ("aiohttp/_websocket/reader.py", {"internal"}),
    ("pydantic/_migration.py", {"internal"}),
    ("aiohttp/_websocket/mask.pyx", {"internal"}),
    ("src/Internal/Store.cs", {"internal"}),
    ("pkg/__init__.py", set()),  # dunder names are not private
    ("serde/src/private/de.rs", {"internal"}),
    ("lib/internal/url.js", {"internal"}),
    ("internal/server/server.go", set()),  # Go: where an application keeps all its code
    ("src/_app.tsx", set()),  # a leading underscore is Python's convention only
    ("bench/server_latency.py", {"benchmark"}),
    ("Benchmarks/Benchmarks/NIOCoreBenchmarks/Alloc.swift", {"benchmark"}),
    ("axum/benches/benches.rs", {"benchmark"}),  # cargo's harness beside a crate's src/
    ("crates/core/benches/parse.rs", {"benchmark"}),
    ("packages/router/bench/match.ts", {"benchmark"}),  # a monorepo package's
    ("benchmarks/bench_validators.py", {"benchmark"}),
    ("benchmark/http/simple.js", {"benchmark"}),  # Node's top-level harness
    ("src/utils/sort.bench.ts", {"benchmark"}),
    ("tests/sort_bench.ts", {"benchmark", "test"}),  # Deno's convention
    ("router_bench_test.go", {"benchmark", "test"}),  # a Go file of benchmarks
    ("benchmarks/src/jmh/java/com/x/ParserBenchmark.java", {"benchmark"}),  # JMH's
    ("benchmarks/src/jmh/java/com/x/Inputs.java", set()),  # sources below: by name only
    ("src/Json.Benchmarks/SerializeBenchmarks.cs", {"benchmark"}),  # BenchmarkDotNet's
    ("src/Json.Benchmarks/Program.cs", {"benchmark"}),  # a .NET benchmark project
    ("tests/benchmarks/test_fields.py", {"test", "benchmark"}),
    ("bench/README.md", {"docs"}),  # what a harness measures is documentation
    # a benchmarking library's own code, or a bench folder where the convention is unclear
    ("src/main/java/org/openjdk/jmh/annotations/Benchmark.java", set()),
    ("packages/vitest/src/runtime/benchmark/index.ts", set()),
    ("torch/utils/benchmark/utils/timer.py", set()),  # singular: only at the top
    ("deepeval/benchmarks/mmlu/mmlu.py", set()),  # a package's own module
    ("cli/tools/bench/mod.rs", set()),  # `deno bench` itself
    ("benchmark/benchmark-common/src/main/java/androidx/benchmark/Profiler.kt", set()),
    ("include/benchmark/benchmark.h", set()),
    ("src/bench/mod.rs", set()),
    ("lib/bench/run.js", set()),
    ("include/bench/timer.h", set()),
    ("a/b/c/benches/x.rs", set()),
    ("workbench/layout.py", set()),
    # end-to-end tests, not end-to-end encryption
    ("vscode-client/e2e/workbench.mjs", {"test"}),
    ("projects/shop/e2e/app.po.ts", {"test"}),  # Angular's
    ("apps/meteor/app/e2e/rocketchat.e2e.ts", set()),
    ("src/e2e/encryption.rs", set()),
])
def test_path_roles(path, roles):
    assert path_roles(path) == roles


def test_reexport_modules_are_judged_by_content():
    assert is_reexport_chunk("pkg/__init__.py", "from .a import A\nfrom .b import B\n\n"
                             "__all__ = [\n    'A',\n    'B',\n]")
    assert is_reexport_chunk("src/index.ts",
                             "export * from './router'\nexport { App } from './app'")
    assert is_reexport_chunk("src/mod.rs", "mod path;\npub use self::path::Path;")
    assert not is_reexport_chunk("src/mod.rs", "pub struct Router {\n    routes: Vec<Route>,\n}")
    assert not is_reexport_chunk("src/client.py", "from .a import A")


@pytest.mark.parametrize(("text", "language", "names"), [
    ("export class Vitest {\n  constructor() {}\n}", "typescript", ["Vitest"]),
    ("func (engine *Engine) Use(middleware ...HandlerFunc) {", "go", ["Use"]),
    ("type Engine struct {", "go", ["Engine"]),
    ("pub trait Serialize {\n    fn serialize(&self);\n}", "rust", ["Serialize", "serialize"]),
    ("impl<'de> Deserialize<'de> for Value {", "rust", []),  # an impl is not a definition
    ("app.listen = function listen() {", "javascript", ["listen"]),
    ("export const router = createRouter()", "typescript", ["router"]),
    ("import type { Vitest } from './core'", "typescript", []),
    ("class Foo:\n    def bar(self): ...", "python", ["Foo", "bar"]),
    ("# class Foo", "markdown", []),
])
def test_defined_names(text, language, names):
    assert defined_names(text, language) == names


def test_definition_evidence_keeps_case_unless_the_query_is_lower_case():
    assert defines_name("Vitest createVitest", ["Vitest"])
    assert not defines_name("vitest", ["Vitest"])  # a const named vitest is not class Vitest
    assert defines_name("Application", ["application"])
    assert stem_is_name("lib/routing.py", ["Routing"])
    assert stem_is_name("src/state_manager.ts", ["StateManager"])


def test_path_match_prefers_names_the_query_explains():
    words = analyze("shell completion request handling").path_words
    plain, _ = path_match("completions.go", words)
    bash, _ = path_match("bash_completions.go", words)
    assert plain > bash > 0
    assert path_match("web_urldispatcher.py", analyze("URL dispatching").path_words)[0] > 0
    assert path_match("utils.js", analyze("utility functions").path_words)[0] > 0
    assert path_match("client.py", analyze("banana bread").path_words) == (0.0, 0.0)
    assert path_match("extract/state.rs", analyze("extractors").path_words)[1] > 0


def _answers(word: str, part: str) -> bool:
    """The rules a path part answers a query word by, one pair at a time: the same stem, the
    word (or its stem) of 5 letters or more inside the part, or a shared prefix of 4 letters
    or more that is 0.8 of the shorter one."""
    if stem(word) == stem(part) or any(len(f) >= 5 and f in part for f in (word, stem(word))):
        return True
    shared = next((i for i, (a, b) in enumerate(zip(word, part, strict=False)) if a != b),
                  min(len(word), len(part)))
    return shared >= 4 and shared >= 0.8 * min(len(word), len(part))


def test_path_parts_answer_the_query_words_the_rules_say():
    """The matcher looks each part up by stem and by first letters instead of comparing it
    with every word: the same words as the rules pair by pair, on edge cases of each rule
    (``parser``/``parsing`` share 4 letters of 6: no; ``pars``/``parser`` 4 of 4: yes)."""
    words = ("dispatching", "util", "pars", "parser", "cfg", "conn", "request", "re",
             "handler", "state")
    parts = ("dispatch", "urldispatcher", "utils", "utility", "parser", "parsing", "cfgs",
             "cfx", "connection", "req", "requests", "handle", "handlers", "re", "restate",
             "statement", "stat", "par", "x", "utilities")
    match_path = PathMatcher(words)
    for part in parts:
        expected = {w for w in words if _answers(w, part)}
        assert match_path._matching_words(part) == expected, part
    assert match_path._matching_words("parsing") == {"pars"}
    assert "pars" in match_path._matching_words("parser")


def test_a_search_s_paths_score_as_each_would_alone():
    """Names and folders are scored once a search: a path met after others sharing its file
    or folder name scores as a fresh matcher scores it."""
    words = analyze("shell completion request handling").path_words
    paths = ["cmd/completions.go", "shell/completions.go", "shell/bash_completions.go",
             "cmd/request.go", "completions/request_handler.go", "completions/mod.rs"]
    match_path = PathMatcher(words)
    assert [match_path(p) for p in paths + paths[::-1]] == [
        PathMatcher(words)(p) for p in paths + paths[::-1]]


def test_path_matching_keeps_nothing_of_past_queries():
    """A server answers many different queries for days: path matching keeps only the
    parts of names between searches (bounded), never anything by query or query word. The
    caches before held 22 MB once full: 8.5 keyed by the query, 12 of words and parts (65,536
    of them); a cache of word and part pairs went when the matcher learnt to look words up."""
    rng = random.Random(0)
    vocab = [f"{a}{b}" for a in ("load", "pars", "rend", "stor", "conn", "sched")
             for b in ("er", "ing", "ed", "ion", "able", "ist", "ant", "ure")] * 3
    vocab = [f"{w}{i}" for i, w in enumerate(vocab)]
    paths = [f"pkg{i % 40}/{rng.choice(vocab)}_{rng.choice(vocab)}.py" for i in range(3000)]
    evidence._parts.cache_clear()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(400):  # searches, each ranking 30 candidates' paths
            match_path = PathMatcher(tuple(rng.sample(vocab, 3)))
            for path in rng.sample(paths, 30):
                match_path(path)
        del match_path
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4 * 2**20, kept


def test_a_module_index_file_is_named_after_its_folder():
    """``routing/mod.rs``, ``path/__init__.py`` and ``pool/index.ts`` are the modules routing,
    path and pool: their file name is the folder's, their folder the one above."""
    words = analyze("Path extractor for URL path parameters").path_words
    assert path_match("extract/path/mod.rs", words) == path_match("extract/path.rs", words)
    assert path_match("extract/path/mod.rs", words)[0] > 0
    assert path_match("web/path/__init__.py", words)[0] > 0
    assert path_match("node/pool/index.ts", analyze("worker pool").path_words)[0] > 0
    assert path_match("src/mod.rs", words) == (0.0, 0.0)  # "src" says nothing
    assert path_match("mod.rs", analyze("mod files").path_words)[0] > 0  # no folder: itself
    assert stem_is_name("src/routing/mod.rs", ["Routing"])
    assert not stem_is_name("src/routing/mod.rs", ["Mod"])


def test_a_chunk_holding_every_query_term_covers_it_fully():
    """Exactly 1.0: the covered weights are added as the total is (``sum()``, which from
    Python 3.12 adds floats more exactly than a loop: 0.1 + 0.2 + 0.3 looped over ``sum()``
    of them is 1.0000000000000002 there)."""

    class Rarity:
        def idf(self, term: str) -> float:
            return {"a": 0.1, "b": 0.2, "c": 0.3}[term]

    assert TermCoverage(("a", "b", "c"), Rarity())(frozenset({"a", "b", "c"})) == 1.0


def test_coverage_weights_rare_terms_more():
    background = build_background([{"terms": "get valu"}, {"terms": "get redirect"},
                                   {"terms": "get"}, {"terms": "valu"}])
    coverage = TermCoverage(tuple(query_terms("get redirect")), background)
    assert coverage({"redirect"}) > 0.5
    assert coverage({"get"}) < 0.5
    assert coverage(set()) == 0.0
    assert coverage({"get"}, "src/redirect.py") == 1.0  # the file's path counts too


def test_background_similarity_is_the_mean_cosine_with_a_prior_for_tiny_samples():
    vectors = [np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)]
    query = np.array([1.0, 0.0], np.float32)
    tiny = build_background([{"terms": "", "vector": v} for v in vectors])
    assert tiny.similarity(query) == pytest.approx(
        (2 * 0.5 + PRIOR_WEIGHT * PRIOR_SIMILARITY) / (2 + PRIOR_WEIGHT))
    large = build_background([{"terms": "", "vector": v} for v in vectors * 128])
    assert large.similarity(query) == pytest.approx(0.5, abs=0.01)  # the sample's mean


def _candidate(path, cosine, text="x", defines="", terms=""):
    return Candidate({"path": path, "text": text, "defines": defines, "terms": terms},
                     cosine)


WEIGHTS = RankingWeights.from_settings()  # the schema defaults


def _context(query, **kwargs):
    return RankContext(analyze(query), build_background([]), WEIGHTS,
                       semantic=True, lexical=True, **kwargs)


def test_a_definition_outranks_a_closer_mention():
    chunks = [_candidate("app/use.py", 0.6, terms="router"),
              _candidate("app/routing.py", 0.35, defines="Router", terms="router")]
    score_chunks(chunks, _context("Router"))
    assert chunks[1].raw > chunks[0].raw


@pytest.mark.parametrize(("text", "path", "name", "expected"), [
    ("pub use axum_core::extract::{\n    FromRef, FromRequest,\n    Request,\n};", "extract/mod.rs",
     "FromRequest", True),
    ("use axum_core::extract::FromRequest;", "middleware/from_fn.rs", "FromRequest", False),
    ("export {\n  getCurrentSuite,\n  getHooks,\n} from '@vitest/runner'", "public/suite.ts",
     "getHooks", True),
    ("export type { VitestRunner } from '@vitest/runner'", "public/suite.ts", "VitestRunner",
     True),
    ("import { getHooks } from '@vitest/runner'", "run.ts", "getHooks", False),
    ("from ._core import (\n    Engine,\n    Session,\n)", "pkg/__init__.py", "Session", True),
    ("from ._core import Session", "pkg/client.py", "Session", False),  # a use, not an export
    ("pub use crate::Json;", "extract/mod.rs", "Jso", False),  # whole words only
])
def test_reexported_names(text, path, name, expected):
    assert reexports_name(text, path, (name,)) is expected


def test_a_name_defined_elsewhere_is_found_where_it_is_reexported():
    """``FromRequest`` comes from another crate: its re-export is where it enters this
    workspace, and ranks above the files that only use it."""
    def chunks():
        return [_candidate("middleware/from_fn.rs", 0.45, terms="fromrequest request",
                           text="impl<S> FromRequest<S> for Fn where S: Send {}"),
                _candidate("extract/mod.rs", 0.35, terms="fromrequest request",
                           text="pub use axum_core::extract::{FromRequest, Request};")]
    external = chunks()
    score_chunks(external, _context("FromRequest"))
    assert [f.path for f in rank_files(external, WEIGHTS)][0] == "extract/mod.rs"
    # defined in the workspace: the definition wins, and the re-export is only a re-export
    defined = [*chunks(), _candidate("extract/from_request.rs", 0.35, defines="FromRequest",
                                     terms="fromrequest request",
                                     text="pub trait FromRequest<S> {}")]
    score_chunks(defined, _context("FromRequest"))
    ranked = [f.path for f in rank_files(defined, WEIGHTS)]
    assert ranked[0] == "extract/from_request.rs"
    assert ranked.index("extract/mod.rs") > ranked.index("middleware/from_fn.rs")


def test_a_named_definition_outranks_a_definition_line_inside_another_chunk():
    trait = _candidate("ser/mod.rs", 0.5, defines="Serialize", terms="serial")
    trait.row["symbol"] = "Serialize"
    in_macro = _candidate("private/doc.rs", 0.5, defines="helper Serialize", terms="serial")
    in_macro.row["symbol"] = "helper"  # ``trait Serialize`` declared inside a macro body
    score_chunks([trait, in_macro], _context("Serialize"))
    assert trait.raw > in_macro.raw
    method = _candidate("client.py", 0.5, defines="send", terms="send")
    method.row["symbol"] = "Client.send"  # a qualified symbol names its last part
    module_code = _candidate("api.py", 0.5, defines="send", terms="send")
    module_code.row["symbol"] = "api"  # ``send = functools.partial(…)`` among module code
    score_chunks([method, module_code], _context("send"))
    assert method.raw > module_code.raw


def test_a_long_function_does_not_outrank_the_definition_a_query_names():
    # tree.go: a 5-line struct and a 250-line function in 12 pieces that all mention it.
    definition = _candidate("tree.go", 0.45, defines="skippedNode", terms="skip node")
    definition.row.update(kind="class", symbol="skippedNode", start_line=407, end_line=411)
    pieces = []
    for i in range(12):
        piece = _candidate("tree.go", 0.5, terms="skip node")
        piece.row.update(kind="method", symbol="node.getValue", start_line=420 + 20 * i,
                         end_line=439 + 20 * i)
        pieces.append(piece)
    chunks = [definition, *pieces]
    score_chunks(chunks, _context("skippedNode"))
    ordered = order_ranges(chunks, WEIGHTS)
    assert ordered[0][0] is definition


def test_a_test_file_ranks_below_its_implementation():
    chunks = [_candidate("tests/test_client.py", 0.62), _candidate("src/client.py", 0.55)]
    score_chunks(chunks, _context("send a request"))
    assert [f.path for f in rank_files(chunks, WEIGHTS)][0] == "src/client.py"
    chunks = [_candidate("tests/test_client.py", 0.62), _candidate("src/client.py", 0.55)]
    score_chunks(chunks, _context("tests for sending a request"))  # asked for: no prior
    assert [f.path for f in rank_files(chunks, WEIGHTS)][0] == "tests/test_client.py"


def _first_of(harness: str, code: str, query: str, **filters) -> str:
    """The file ranked first of a harness closer to ``query`` and the code it measures."""
    chunks = [_candidate(harness, 0.66), _candidate(code, 0.58)]
    score_chunks(chunks, _context(query, filters=SearchFilters(**filters)))
    return [f.path for f in rank_files(chunks, WEIGHTS)][0]


def test_a_benchmark_ranks_below_the_code_it_measures():
    pair = ("bench/index_yield.py", "rag_lsp/indexer.py")
    assert _first_of(*pair, "how does a search wait for indexing to yield") == pair[1]
    # asked for in words, or by a path filter: no prior
    assert _first_of(*pair, "the benchmark of searches waiting for indexing") == pair[0]
    assert _first_of(*pair, "how does a search wait for indexing to yield",
                     paths=("bench/**",)) == pair[0]


def test_a_benchmark_among_the_tests_is_asked_for_whole():
    """A harness kept among the tests (a Go ``*_bench_test.go``, ``tests/benchmarks/``) is
    both a test and a benchmark; a query that asks for benchmarks lifts both priors."""
    pair = ("pkg/router_bench_test.go", "pkg/router.go")
    assert _first_of(*pair, "matching a request against the routes") == pair[1]
    assert _first_of(*pair, "the benchmark of matching a request against the routes") == pair[0]


def test_a_private_module_ranks_below_the_public_one():
    chunks = [_candidate("pydantic/_internal/_config.py", 0.60),
              _candidate("pydantic/config.py", 0.57)]
    score_chunks(chunks, _context("model configuration options"))
    assert [f.path for f in rank_files(chunks, WEIGHTS)][0] == "pydantic/config.py"
    # asked for in words ("private", which the path does not contain), or by a path filter
    for ctx in (_context("private handling of model configuration"),
                _context("model configuration options",
                         filters=SearchFilters(paths=("pydantic/_internal/**",)))):
        chunks = [_candidate("pydantic/_internal/_config.py", 0.60),
                  _candidate("pydantic/config.py", 0.57)]
        score_chunks(chunks, ctx)
        assert [f.path for f in rank_files(chunks, WEIGHTS)][0] == "pydantic/_internal/_config.py"


def test_semantic_noise_scores_zero():
    near_background = [_candidate("src/a.py", 0.30)]
    score_chunks(near_background, _context("where is the cache", noise=0.2))
    unknown_words = [_candidate("src/a.py", 0.45)]
    score_chunks(unknown_words, _context("xqzv plomk", noise=0.1, answerable=0.0))
    assert near_background[0].raw == unknown_words[0].raw == 0.0


def test_file_agreement_has_diminishing_returns():
    one = [_candidate("a.py", 0.7)]
    many = [_candidate("b.py", 0.6) for _ in range(20)]
    for chunks in (one, many):
        score_chunks(chunks, _context("something"))
    files = {f.path: f for f in rank_files(one + many, WEIGHTS)}
    assert files["b.py"].raw > files["a.py"].raw  # agreeing chunks lift a file …
    single = many[0].raw
    assert files["b.py"].raw < single * (1 + 0.5 * 0.7 / (1 - 0.7)) + 1e-9  # … boundedly
    assert files["b.py"].chunks[0].raw >= files["b.py"].chunks[-1].raw


def test_pieces_of_one_long_line_do_not_agree_with_each_other():
    def window(path, start, end):
        c = _candidate(path, 0.6)
        c.row.update(kind="text", symbol="", start_line=start, end_line=end)
        return c
    # A paragraph on one line, cut into pieces to fit the model (the first with the title).
    passage = [window("long.txt", 1, 2), window("long.txt", 2, 2), window("long.txt", 2, 2)]
    spread = [window("spread.go", 1, 20), window("spread.go", 40, 60), window("spread.go", 80, 99)]
    chunks = passage + spread
    score_chunks(chunks, _context("something"))
    files = {f.path: f for f in rank_files(chunks, WEIGHTS)}
    assert files["long.txt"].raw == pytest.approx(passage[0].raw)  # one place: no bonus
    assert files["spread.go"].raw > files["long.txt"].raw  # three places agree


def test_a_passage_or_a_definition_is_one_place_however_many_chunks():
    def chunk(path, start, end, kind="text", symbol=""):
        c = _candidate(path, 0.6)
        c.row.update(kind=kind, symbol=symbol, start_line=start, end_line=end)
        return c
    # A title on its own line, then its text in overlapping windows: one passage.
    passage = [chunk("notes.txt", 1, 1), chunk("notes.txt", 2, 30), chunk("notes.txt", 25, 55)]
    apart = [chunk("notes2.txt", 1, 20), chunk("notes2.txt", 40, 60)]  # a gap: two places
    defs = [chunk("lib.py", 1, 10, "function", "a"), chunk("lib.py", 11, 20, "function", "b")]
    # One long function cut in three pieces (each carrying its signature): one place.
    pieces = [chunk("big.py", 1, 40, "function", "run"), chunk("big.py", 41, 80, "function", "run"),
              chunk("big.py", 81, 99, "function", "run")]
    chunks = passage + apart + defs + pieces
    score_chunks(chunks, _context("something"))
    files = {f.path: f for f in rank_files(chunks, WEIGHTS)}
    assert files["notes.txt"].raw == pytest.approx(passage[0].raw)
    assert files["notes2.txt"].raw > files["notes.txt"].raw
    assert files["lib.py"].raw > max(c.raw for c in defs)  # adjacent definitions: two places
    assert files["big.py"].raw == pytest.approx(max(c.raw for c in pieces))
    # Lexical search alone: each window's coverage sees only its words, so windows agree.
    lexical = {f.path: f for f in rank_files(chunks, WEIGHTS, passages=False)}
    assert lexical["notes.txt"].raw > passage[0].raw
    assert lexical["big.py"].raw > max(c.raw for c in pieces)


def test_scores_squash_to_zero_one_and_back():
    assert squash(0.0) == 0.0 and 0.6 < squash(1.0) < 0.7 and squash(50) <= 1.0
    assert unsquash(squash(0.8)) == pytest.approx(0.8)


def test_a_query_about_something_else_is_not_answerable():
    # best cosine margin over the background, and the share of terms the workspace has
    assert answerable(analyze("how are rainbows formed"), 0.18, 0.5) == 0.0
    assert answerable(analyze("how are routes registered"), 0.35, 1.0) == 1.0
    assert 0.0 < answerable(analyze("how are routes registered"), 0.2, 1.0) < 1.0
    # identifier lookups are lexical: a name the workspace has is answerable at any margin
    assert answerable(analyze("Depends"), 0.0, 1.0) == 1.0
    assert answerable(analyze("Xyzzyplugh"), 0.3, 0.0) == 0.0
    assert answerable(analyze("where is the cache"), None, 1.0) == 1.0  # lexical mode


def test_a_query_whose_words_meet_in_no_one_file_is_less_answerable():
    # every word occurs in the workspace (support 1.0), but each in another file: a word
    # shared in another sense, not the code's subject
    q = analyze("planting tulip bulbs")
    background = build_background([{"terms": "x"}] * 20)
    apart = [_candidate("a/plant.go", 0.4, terms="plant"), _candidate("b/tulip.go", 0.4),
             _candidate("c/bulb.go", 0.4, terms="bulb node")]
    together = [_candidate("a/plant.go", 0.4, terms="plant tulip"),
                _candidate("a/plant.go", 0.4, terms="bulb")]
    assert query_support(q, apart, background.knows) == 1.0
    assert query_cohesion(q, apart, background) == pytest.approx(1 / 3)
    assert query_cohesion(q, together, background) == 1.0  # two chunks of one file
    margin = 0.25
    assert answerable(q, margin, 1.0, 1 / 3) < answerable(q, margin, 1.0, 1.0) == \
        answerable(q, margin, 1.0)
    # identifier lookups and lexical mode do not use it
    assert answerable(analyze("Depends"), 0.0, 1.0, 0.0) == 1.0
    assert answerable(analyze("where is the cache"), None, 1.0, 0.0) == 1.0


def test_the_digits_of_an_identifier_are_no_word_of_their_own():
    """``zqc10`` is looked for as itself and ``zqc``, not as ``10`` too: searched for, ``10``
    matched every file under a folder ``pkg10`` (in its path) before the one file that had
    ``zqc10`` in it. A number written as a word of its own stays one."""
    q = analyze("zqc10")
    assert (q.terms, q.path_words, q.fulltext) == (("zqc10", "zqc"), ("zqc10", "zqc"), "zqc10")
    assert "8" not in analyze("utf8 decode").terms
    assert "http" in analyze("parseHTTPResponse_v2").terms
    assert "404" in analyze("error 404").terms
    assert query_terms("module 199") == ["modul", "199"]


def test_a_candidate_keeps_the_query_terms_it_holds_whole_words_only():
    c = Candidate({"path": "a.py", "terms": "login handler sess token"})
    assert c.terms == {"login", "handler", "sess", "token"}  # unnarrowed: every stored term
    c.keep_terms(("log", "token", "handler", "logout", "sess", "ss"))
    assert c.terms == {"token", "handler", "sess"}  # not "log" inside "login", nor "ss"
    bare = Candidate({"path": "b.py"})
    bare.keep_terms(("token",))
    assert bare.terms == frozenset()
