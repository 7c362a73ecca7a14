"""The tree-sitter chunker: definitions, qualified symbols and sizes in every language."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lsp.chunking import ChunkOptions, chunk_document, language_for
from rag_lsp.chunking.syntax import chunk_syntax, grammar_for, supported_grammars
from rag_lsp.chunking.syntax import grammars as grammar_module
from rag_lsp.chunking.syntax.tables import TABLES
from tests.syntax_samples import SAMPLES
from tests.test_chunking_text import check_invariants

SMALL = ChunkOptions(max_tokens=48, window_tokens=48, overlap_tokens=8, headers=False)


def test_every_grammar_loads_from_its_wheel():
    # No grammar is fetched at run time: each comes from an installed wheel.
    assert set(TABLES) == set(supported_grammars())
    for grammar in supported_grammars():
        assert grammar_module.load_language(grammar) is not None, grammar


def test_every_language_has_a_sample():
    assert set(SAMPLES) == set(supported_grammars())


@pytest.mark.parametrize("grammar", sorted(SAMPLES))
def test_definitions_and_qualified_symbols(grammar, token_counter):
    name, source, expected = SAMPLES[grammar]
    assert grammar_for(language_for(name), name) == grammar
    chunks = chunk_syntax(source, grammar, token_counter, SMALL, path=name)
    assert chunks is not None
    assert [(c.kind, c.symbol, c.start_line, c.end_line) for c in chunks] == expected
    check_invariants(chunks, source, token_counter, SMALL)


@pytest.mark.parametrize("grammar", sorted(SAMPLES))
def test_a_file_that_fits_keeps_whole_definitions(grammar, token_counter):
    name, source, _ = SAMPLES[grammar]
    chunks = chunk_syntax(source, grammar, token_counter, ChunkOptions(), path=name)
    check_invariants(chunks, source, token_counter, ChunkOptions())
    # At the default size no definition of these samples is cut: no two chunks share a symbol
    # except module code around the definitions.
    symbols = [c.symbol for c in chunks if c.kind != "module"]
    assert len(symbols) == len(set(symbols))


def test_document_dispatch_uses_the_grammar(token_counter):
    name, source, _ = SAMPLES["go"]
    chunks = chunk_document(source, "go", token_counter, SMALL, path=name)
    assert ("method", "Engine.Use") in {(c.kind, c.symbol) for c in chunks}
    assert grammar_for("c", "include/ring.h") == "cpp"  # headers are C or C++
    assert grammar_for("shell", "install.sh") == "bash"
    assert grammar_for("sql", "schema.sql") is None
    tsx = chunk_document(SAMPLES["tsx"][1], "typescript", token_counter, path="ui/Button.tsx")
    assert [(c.kind, c.symbol) for c in tsx] == [("function", "Button")]


def test_doc_comment_and_attributes_stay_with_their_definition(token_counter):
    chunks = chunk_syntax(SAMPLES["rust"][1], "rust", token_counter, SMALL, path="router.rs")
    router = next(c for c in chunks if c.symbol == "Router" and c.kind == "class")
    assert router.text.startswith("/// The router: paths to services.\n#[derive(Clone)]")
    go = chunk_syntax(SAMPLES["go"][1], "go", token_counter, SMALL, path="gin.go")
    use = next(c for c in go if c.symbol == "Engine.Use")
    assert use.text.startswith("// Use attaches a global middleware")


def test_jsdoc_one_blank_line_above_still_belongs(token_counter):
    source = ("/**\n * Send a response body.\n */\n\n"
              "res.send = function send(body) {\n  return this.end(body);\n};\n")
    chunks = chunk_syntax(source, "javascript", token_counter, ChunkOptions(), path="r.js")
    assert [(c.kind, c.symbol, c.start_line) for c in chunks] == [("function", "res.send", 1)]


def test_oversized_function_is_cut_at_statements_with_its_signature(token_counter):
    body = "\n".join(f"    total += compute_value_number_{i}(items, weights, offset)"
                     for i in range(40))
    source = ("fn accumulate(items: &[u32]) -> u32 {\n    let mut total = 0;\n"
              f"{body}\n    total\n}}\n")
    chunks = chunk_syntax(source, "rust", token_counter, ChunkOptions(max_tokens=120),
                          path="acc.rs")
    assert len(chunks) > 2
    assert {c.symbol for c in chunks} == {"accumulate"}
    assert all(c.context == "fn accumulate(items: &[u32]) -> u32" for c in chunks)
    check_invariants(chunks, source, token_counter, ChunkOptions(max_tokens=120))


def test_small_neighbours_are_grouped(token_counter):
    imports = "\n".join(f'import "pkg/module{i}"' for i in range(8))
    consts = "\n".join(f"const Limit{i} = {i}" for i in range(8))
    source = f"package limits\n\n{imports}\n\n{consts}\n"
    chunks = chunk_syntax(source, "go", token_counter, ChunkOptions(), path="limits.go")
    assert len(chunks) == 1 and chunks[0].kind == "module"


def test_a_big_constant_is_named(token_counter):
    entries = "\n".join(f'  "key{i}": "value number {i}",' for i in range(12))
    source = f"export const DEFAULTS = {{\n{entries}\n}}\n\nexport function f() {{}}\n"
    chunks = chunk_syntax(source, "typescript", token_counter, ChunkOptions(max_tokens=100),
                          path="defaults.ts")
    assert ("constant", "DEFAULTS") in {(c.kind, c.symbol) for c in chunks}


def test_syntax_errors_lose_no_lines(token_counter):
    source = "class Broken {\n  method( {\n    return 1\n}\n\nfunction ok() { return 2 }\n"
    chunks = chunk_syntax(source, "typescript", token_counter, SMALL, path="broken.ts")
    check_invariants(chunks, source, token_counter, SMALL)


def test_minified_file_is_not_parsed(token_counter, caplog):
    minified = ";".join(f"var a{i}=function(b){{return b*{i}}}" for i in range(200_000))
    assert len(minified) > 5_000_000
    caplog.set_level(logging.DEBUG, logger="rag_lsp.chunking.syntax")
    assert chunk_syntax(minified, "javascript", token_counter, ChunkOptions(),
                        path="app.min.js") is None  # (bench/chunking_speed.py times it)
    assert "minified" in caplog.text


def test_a_grammar_that_cannot_load_falls_back_to_windows(token_counter, monkeypatch, caplog):
    monkeypatch.setitem(grammar_module._GRAMMAR_MODULES, "go", ("no_such_module", "language"))
    monkeypatch.setattr(grammar_module, "_languages", {})
    monkeypatch.setattr(grammar_module, "_local", type(grammar_module._local)())
    chunks = chunk_document(SAMPLES["go"][1], "go", token_counter, path="gin.go")
    assert {c.kind for c in chunks} == {"text"}
    assert "cannot load the tree-sitter grammar for go" in caplog.text


def test_chunking_is_deterministic(token_counter):
    for grammar, (name, source, _) in SAMPLES.items():
        first = chunk_syntax(source, grammar, token_counter, SMALL, path=name)
        assert first == chunk_syntax(source, grammar, token_counter, SMALL, path=name)


_CODE = st.sampled_from([
    "fn f() {", "}", "impl A for B {", "struct S { a: u8 }", "/// doc", "#[test]", "",
    "    let x = 1;", "mod m {", "pub const C: u8 = 1;", "\t", "é中", "// c", "{", "fn g();",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_CODE, max_size=40), st.integers(min_value=16, max_value=80))
def test_any_text_keeps_the_chunk_promises(token_counter, lines, max_tokens):
    source = "\n".join(lines)
    options = ChunkOptions(max_tokens=max_tokens, window_tokens=max_tokens, headers=False)
    chunks = chunk_syntax(source, "rust", token_counter, options, path="x.rs")
    check_invariants(chunks, source, token_counter, options)


def test_a_workspace_of_every_language_indexes_with_symbols(tmp_path, embedder):
    from rag_lsp.config import Settings
    from rag_lsp.search.results import SearchFilters
    from rag_lsp.workspace import Workspace

    root = tmp_path / "polyglot"
    for grammar, (name, source, _) in SAMPLES.items():
        (root / grammar).mkdir(parents=True)
        (root / grammar / name).write_text(source, encoding="utf-8")
    (root / "broken.go").write_text("package x\n\nfunc Broken( {\n  return\n\nfunc Fine() {}\n",
                                    encoding="utf-8")
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    report = ws.index()
    assert report.files_indexed == len(SAMPLES) + 1
    rows = ws._open_store().file_records()
    assert "broken.go" in rows and rows["broken.go"].chunks >= 1

    hits = ws.search("Engine.Use middleware", filters=SearchFilters(
        languages=("go",), kinds=("method",))).results
    assert hits and (hits[0].path, hits[0].symbol) == ("go/gin.go", "Engine.Use")
    # Every language's file is stored with its language and its definitions' kinds and
    # symbols, as chunked at the default size.
    store = ws._open_store()
    for grammar, (name, source, _) in SAMPLES.items():
        rows = store.chunk_rows(f"path = '{grammar}/{name}'",
                                ["language", "kind", "symbol", "start_line", "end_line"])
        chunks = chunk_document(source, language_for(name), ws._counter, path=name)
        assert sorted((r["kind"], r["symbol"], r["start_line"], r["end_line"]) for r in rows) \
            == sorted((c.kind, c.symbol, c.start_line, c.end_line) for c in chunks), grammar
        assert {r["language"] for r in rows} == {language_for(name)}
        assert any(r["kind"] != "text" for r in rows), grammar


def test_a_closing_brace_is_not_a_chunk_of_its_own(token_counter):
    methods = "\n".join(f"    fn method_{i}(&self) -> u32 {{ self.value * {i} + self.offset }}"
                        for i in range(12))
    source = f"impl Counter {{\n{methods}\n}}\n"
    chunks = chunk_syntax(source, "rust", token_counter, ChunkOptions(max_tokens=60),
                          path="counter.rs")
    assert all(c.text.strip() != "}" for c in chunks)
    assert chunks[-1].end_line == source.count("\n")  # folded into the last method's chunk
    check_invariants(chunks, source, token_counter, ChunkOptions(max_tokens=60))
