"""What part a file plays in a code base, read from its path (and, for re-export files, its
text): tests, benchmark harnesses, documentation, examples, legacy copies, generated or
vendored code, data and configuration, re-export modules, modules their package marks
private. A question about code is answered by implementation first; these roles rank lower
unless the query or a filter asks for them (see ``ranking``).
"""

from __future__ import annotations

import functools
import re

_TEST_FILE = re.compile(
    r"(?:^|/)(?:test_[^/]*\.py|[^/]*_test\.(?:py|go|rb|c|cc|cpp|lua|dart|exs?)|conftest\.py"
    r"|[^/]*\.(?:test|spec)\.[cm]?[jt]sx?|[^/]*_spec\.(?:rb|lua)"
    r"|[^/]*Tests?\.(?:java|kt|cs|swift|php|scala)|[^/]*(?:Spec|Suite)\.(?:kt|swift|scala)"
    r"|test_helpers?[^/]*\.\w+)$"
)
_TEST_DIR = re.compile(
    r"(?:^|/)(?:tests?|__tests__|__mocks__|specs?|testing|test_suite|testdata|fixtures)/")
# End-to-end tests: an ``e2e/`` folder near the top and not in a source folder (Rocket.Chat's
# ``apps/meteor/app/e2e/`` is end-to-end encryption).
_E2E_DIR = re.compile(r"^(?:(?!(?:src|lib|app)/)[^/]+/){0,2}e2e/")
# Benchmark harnesses, read from the path where the convention is clear: a top-level bench
# folder (Node's ``benchmark/``, asv's ``benchmarks/``, swift-package-benchmark's
# ``Benchmarks/``), cargo's ``benches/`` beside a crate's ``src/``, a monorepo package's bench
# folder, one inside a test folder, a .NET benchmark project (``Foo.Benchmarks/``). A bench
# folder elsewhere is often the product's own code (``deepeval/benchmarks/``, Deno's
# ``cli/tools/bench/``, vitest's ``packages/vitest/src/runtime/benchmark/``), and so is one
# with sources below it (androidx's ``benchmark/benchmark-common/src/main/``).
_BENCH_DIR = re.compile(
    r"^(?:bench|benches|benchmarks?)/"
    r"|^(?:(?!(?:src|lib|include)/)[^/]+/){1,2}benches/"
    r"|^(?:packages|crates|libs|modules)/[^/]+/(?:bench|benches|benchmarks?)/"
    r"|(?:^|/)tests?/(?:bench|benches|benchmarks?)/"
    r"|(?:^|/)[^/]+\.Benchmarks?/", re.IGNORECASE)
_SOURCES_BELOW = re.compile(r"/(?:src|main)/")
# tinybench's ``*.bench.ts``, Deno's ``*_bench.ts``, Go benchmarks in a ``_test.go`` of their
# own, JMH's and BenchmarkDotNet's ``*Benchmark.java``/``.cs`` (not JMH's own ``Benchmark.java``).
_BENCH_FILE = re.compile(
    r"(?:^|/)[^/]*[._]bench\.[cm]?[jt]sx?$|(?:^|/)[^/]*bench[^/]*_test\.go$"
    r"|(?:^|/)[^/]+Benchmarks?\.(?:java|kt|scala|cs|swift)$")
_DOC_FILE = re.compile(r"\.(?:md|markdown|mdx|rst|adoc|txt)$", re.IGNORECASE)
_CHANGELOG = re.compile(r"(?:^|/)(?:CHANGELOG|CHANGES|HISTORY|NEWS|RELEASES?)[^/]*$",
                        re.IGNORECASE)
_EXAMPLE_DIR = re.compile(r"(?:^|/)(?:_?examples?|samples?|demos?|docs?_src|tutorials?)/")
_LEGACY_DIR = re.compile(r"(?:^|/)(?:_?compat|legacy|deprecated|v1)/")
_GENERATED = re.compile(
    r"(?:^|/)(?:vendor|vendored|third_party|thirdparty|generated|gen|__generated__)/"
    r"|(?:_pb2(?:_grpc)?\.pyi?|\.pb\.go|\.g\.dart|\.min\.[cm]?js|\.generated\.\w+|\.d\.ts)$")
_DATA_FILE = re.compile(
    r"\.(?:json|ya?ml|toml|ini|cfg|xml|csv|lock|snap|svg)$|(?:^|/)\.[^/]+$", re.IGNORECASE)
# Code its own package marks private, behind a public module that defines and documents the
# names users ask about: Python's leading underscore (``_internal/``, ``_validators.py``; PEP 8's
# "internal use"), and ``private``/``internal`` folders (serde's ``private/``, Java's and
# Node's ``internal`` packages). Go is left out: its ``internal/`` is visibility the compiler
# enforces, and applications keep all their code there.
_PYTHON_PRIVATE = re.compile(r"(?:^|/)_[A-Za-z][^/]*(?:/|\.(?:pyi?|pyx|pxd)$)")
_PYTHON_FILE = (".py", ".pyi", ".pyx", ".pxd")
_PRIVATE_DIR = re.compile(r"(?:^|/)_{0,2}(?:private|internal)/", re.IGNORECASE)
# Files that stand for their folder's module (``routing/mod.rs`` is ``routing``).
MODULE_INDEX_FILES = frozenset({"mod.rs", "__init__.py", "index.ts", "index.js", "index.mjs",
                                "index.tsx", "index.jsx"})
# Files that usually only gather and re-export names from elsewhere.
REEXPORT_NAMES = MODULE_INDEX_FILES | {"lib.rs", "package-info.java"}
_REEXPORT_LINE = re.compile(
    r"^\s*(?:from\s+\S+\s+import\b|import\b|export\s+(?:\*|\{|type\s+\{|default\s+\w+;?$)"
    r"|pub\s+(?:use|mod)\b|mod\s+\w+;|use\s|__all__|[\"'][\w.]+[\"'],?$|\)|\]|\}|#|//|/\*|\*)")

ROLES = ("test", "benchmark", "docs", "example", "legacy", "generated", "data", "reexport",
         "internal")


@functools.lru_cache(maxsize=16384)
def path_roles(path: str) -> frozenset[str]:
    """Roles of a workspace-relative POSIX path (several may apply, none for plain code)."""
    roles = set()
    if _TEST_FILE.search(path) or _TEST_DIR.search(path) or _E2E_DIR.search(path):
        roles.add("test")
    if _DOC_FILE.search(path) or _CHANGELOG.search(path):
        roles.add("docs")
    elif _BENCH_FILE.search(path) or _in_bench_folder(path):  # a harness's docs are docs
        roles.add("benchmark")
    if _EXAMPLE_DIR.search(path):
        roles.add("example")
    if _LEGACY_DIR.search(path):
        roles.add("legacy")
    if _GENERATED.search(path):
        roles.add("generated")
    if _DATA_FILE.search(path):
        roles.add("data")
    if _is_internal(path):
        roles.add("internal")
    return frozenset(roles)


def _in_bench_folder(path: str) -> bool:
    """Whether ``path`` is in a bench folder of the kinds above, with no ``src/`` or ``main/``
    below it (the search starts at the bench folder's own slash)."""
    found = _BENCH_DIR.search(path)
    return found is not None and not _SOURCES_BELOW.search(path, found.end() - 1)


def _is_internal(path: str) -> bool:
    if path.endswith(".go"):
        return False
    if path.endswith(_PYTHON_FILE) and _PYTHON_PRIVATE.search(path):
        return True
    return bool(_PRIVATE_DIR.search(path))


def is_reexport_chunk(path: str, text: str) -> bool:
    """A chunk of ``__init__.py``/``index.ts``/``mod.rs``… made (almost) only of imports and
    re-exports. Judged by content: many ``mod.rs`` and ``index.ts`` files hold real code."""
    if path.rsplit("/", 1)[-1] not in REEXPORT_NAMES:
        return False
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return False
    plain = sum(1 for line in lines if _REEXPORT_LINE.match(line))
    return plain >= 0.8 * len(lines)
