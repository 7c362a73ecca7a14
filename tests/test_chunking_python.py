"""Python chunks from the syntax tree: ranges, kinds, symbols, splitting, broken files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lsp.chunking import ChunkOptions, chunk_document
from rag_lsp.chunking.syntax import chunk_syntax
from tests.test_chunking_text import check_invariants, words

SAMPLE = '''\
"""Module docstring."""

import os
from typing import Any

LIMIT = 3


# Helper comment, attached.
@decorator
@other(arg=1)
def helper(x: int) -> int:
    """Double it."""
    return x * 2


class Small(Base):
    """Small class."""

    size = 1

    def method(self):
        return self.size


async def fetch(
    url: str,
) -> bytes:
    return b""

if __name__ == "__main__":
    helper(LIMIT)
'''


DEFAULT = ChunkOptions()


def chunk_python(text, counter, options=DEFAULT, *, path=""):
    return chunk_syntax(text, "python", counter, options, path=path)


def layout(chunks):
    return [(c.start_line, c.end_line, c.kind, c.symbol) for c in chunks]


def test_module_functions_and_small_class(token_counter):
    chunks = chunk_python(SAMPLE, token_counter, path="pkg/sample.py")
    assert layout(chunks) == [
        (1, 6, "module", "sample"),       # docstring, imports, constant
        (9, 14, "function", "helper"),    # from the comment above the decorators
        (17, 23, "class", "Small"),       # fits: one chunk, no method chunks
        (26, 29, "function", "fetch"),    # async, multi-line signature
        (31, 32, "module", "sample"),     # the __main__ block
    ]
    assert all(c.context == "" for c in chunks)
    assert chunks[1].text.startswith("# Helper comment, attached.\n@decorator\n@other")
    check_invariants(chunks, SAMPLE, token_counter, ChunkOptions())


def test_module_symbol_is_empty_without_path(token_counter):
    assert chunk_python("import os\n", token_counter)[0].symbol == ""


def test_comment_separated_by_blank_line_stays_with_module(token_counter):
    text = "x = 1\n# about x\n\ndef f():\n    return x\n"
    assert layout(chunk_python(text, token_counter)) == [
        (1, 2, "module", ""), (4, 5, "function", "f"),
    ]


BIG_CLASS = f'''\
@dataclass
class Store(Base, metaclass=Meta):
    """{words(10)}"""

    limit = 10

    def first(self):
        return "{words(20)}"

    # comment above the second method
    @property
    def second(self):
        return "{words(20)}"

    tail = "{words(5)}"
'''


def test_big_class_splits_into_header_and_methods(token_counter):
    options = ChunkOptions(max_tokens=60)
    chunks = chunk_python(BIG_CLASS, token_counter, options)
    assert layout(chunks) == [
        (1, 5, "class", "Store"),
        (7, 8, "method", "Store.first"),
        (10, 13, "method", "Store.second"),
        (15, 15, "class", "Store"),
    ]
    assert {c.context for c in chunks[1:]} == {"class Store(Base, metaclass=Meta):"}
    check_invariants(chunks, BIG_CLASS, token_counter, options)


def test_class_that_fits_is_one_chunk(token_counter):
    chunks = chunk_python(BIG_CLASS, token_counter, ChunkOptions(max_tokens=254))
    assert layout(chunks) == [(1, 15, "class", "Store")]


BIG_FUNCTION = f'''\
@cache
def compute(
    a: int,
    b: dict[str, int] = {{"k": 1}},
) -> int:
    """{words(10)}"""
    total = a
    for key in b:
        total += b[key]
        print("{words(20)}")
        print("{words(20)}")
    if total:
        return "{words(20)}"
    return total
'''


def test_oversized_function_pieces_keep_the_signature(token_counter):
    options = ChunkOptions(max_tokens=80)
    chunks = chunk_python(BIG_FUNCTION, token_counter, options)
    signature = 'def compute(\na: int,\nb: dict[str, int] = {"k": 1},\n) -> int:'
    assert len(chunks) > 1
    assert all(c.kind == "function" and c.symbol == "compute" for c in chunks)
    assert all(c.context == signature for c in chunks)
    # Consecutive whole lines, from the decorator to the last line.
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 14
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start_line == before.end_line + 1
    # Statement boundaries are preferred: the `if` block (lines 12-13) is kept together.
    assert any(c.start_line <= 12 and c.end_line >= 13 for c in chunks)
    check_invariants(chunks, BIG_FUNCTION, token_counter, options)


def test_oversized_method_context_has_class_and_signature(token_counter):
    text = "class Box:\n" + "\n".join(
        "    " + line if line else "" for line in BIG_FUNCTION.splitlines()) + "\n"
    options = ChunkOptions(max_tokens=90)
    chunks = chunk_python(text, token_counter, options)
    methods = [c for c in chunks if c.kind == "method"]
    assert len(methods) > 1 and {c.symbol for c in methods} == {"Box.compute"}
    assert all(c.context.startswith("class Box:\ndef compute(\n") for c in methods)
    check_invariants(chunks, text, token_counter, options)


def test_nested_functions_stay_in_their_parent(token_counter):
    text = "def outer():\n    def inner():\n        return 1\n    return inner\n"
    assert layout(chunk_python(text, token_counter)) == [(1, 4, "function", "outer")]


def test_a_syntax_error_keeps_the_rest_of_the_file_structured(token_counter):
    text = "def ok():\n    return 1\n\ndef broken(:\n    pass\n\ndef fine():\n    return 2\n"
    chunks = chunk_document(text, "python", token_counter, path="src/broken.py")
    assert (1, 2, "function", "ok") in layout(chunks)
    assert (7, 8, "function", "fine") in layout(chunks)
    check_invariants(chunks, text, token_counter, ChunkOptions())


@pytest.mark.parametrize("text", ["x = 1\x00\ny = 2\n", "a = 1\rb = 2\n"])
def test_null_bytes_and_lone_cr_lose_nothing(token_counter, text):
    # tree-sitter counts lines by "\n" only, as the chunk ranges do: nothing drifts.
    chunks = chunk_python(text, token_counter, path="odd.py")
    check_invariants(chunks, text, token_counter, ChunkOptions())


REPO_SOURCES = sorted((Path(__file__).resolve().parents[1] / "rag_lsp").rglob("*.py"))


@pytest.mark.parametrize("max_tokens", [30, 80, 254])
def test_invariants_on_this_repository(token_counter, max_tokens):
    options = ChunkOptions(max_tokens=max_tokens)
    for path in REPO_SOURCES:
        text = path.read_text(encoding="utf-8")
        chunks = chunk_python(text, token_counter, options, path=str(path))
        check_invariants(chunks, text, token_counter, options)
        assert "text" not in {c.kind for c in chunks}, path


def _definition(kind: str, name: str, body_lines: int, decorated: bool) -> str:
    head = "@decorator\n" if decorated else ""
    body = "\n".join(f"    v{i} = '{words(6)}'" for i in range(body_lines)) or "    pass"
    if kind == "class":
        return f"{head}class {name}:\n{body}\n    def m(self):\n{body.replace('    ', '        ')}"
    if kind == "def":
        return f"{head}def {name}(a,\n        b):\n{body}"
    items = "\n".join(f"    '{words(6)}'," for _ in range(body_lines))
    return f"{name} = [\n{items}\n]" if body_lines else f"{name} = 1"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.tuples(st.sampled_from(["class", "def", "stmt"]),
                                st.integers(0, 12), st.booleans(), st.integers(0, 2)),
                      max_size=8),
       max_tokens=st.integers(1, 120))
def test_python_keeps_invariants(token_counter, parts, max_tokens):
    text = "\n".join(_definition(kind, f"n{i}", lines, dec) + "\n" * blanks
                     for i, (kind, lines, dec, blanks) in enumerate(parts))
    options = ChunkOptions(max_tokens=max_tokens)
    chunks = chunk_python(text, token_counter, options)
    check_invariants(chunks, text, token_counter, options)
    assert "text" not in {c.kind for c in chunks}
    defined = {f"n{i}" for i, (kind, *_rest) in enumerate(parts) if kind != "stmt"}
    assert defined <= {c.symbol.split(".")[0] for c in chunks}
