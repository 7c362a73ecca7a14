"""What a query is: identifier-like or natural language, its terms, and what it asks for.

``Depends``, ``field_validator``, ``Router.handle`` and ``serde::Serialize`` are looked up like
symbols (judged answerable by their words alone; a definition of the name is the best answer);
"where are redirects followed?" is read for meaning. The full-text query gets the parts of
compound identifiers added (``VitestProject`` also looks for ``vitest project``), as the
index has them too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_lsp.terms import STOP_WORDS, query_parts, query_terms, split_identifier, stem

_TOKEN = re.compile(r"[A-Za-z_$][\w$]*(?:(?:::|\.|->|\\)[A-Za-z_$][\w$]*)*")
# camelCase, PascalCase with a second hump, snake_case, SCREAMING_CASE, digits inside
_COMPOUND = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]|[A-Za-z]_[A-Za-z0-9]|[A-Za-z][0-9]")
_QUALIFIED = re.compile(r"::|\.|->|\\")
# Words that ask for a kind of file the ranking otherwise puts below implementation. Kept
# narrow on purpose: "test runner" in a testing framework or "documentation generation" are
# questions about code; "tests for the parser" or "the README" are not.
ROLE_WORDS = {
    "test": ("tests", "testing", "testcase", "testcases", "unittest", "unittests", "pytest",
             "spec", "specs", "fixture", "fixtures", "e2e"),
    "benchmark": ("benchmark", "benchmarks", "benchmarking", "bench", "benches"),
    "docs": ("docs", "readme", "changelog", "guide", "tutorial", "documented"),
    "example": ("example", "examples", "sample", "samples", "demo", "demos"),
    "legacy": ("deprecated", "legacy", "compat", "v1"),
    "internal": ("internal", "internals", "private"),
}
# Path parts too common to say anything about a file.
_SKIP_PATH = frozenset({"py", "js", "ts", "go", "rs", "src", "lib"})


def is_identifier(token: str) -> bool:
    """True for tokens written the way code names things (not plain words)."""
    return bool(_COMPOUND.search(token) or _QUALIFIED.search(token))


@dataclass(frozen=True)
class QueryAnalysis:
    text: str
    identifiers: tuple[str, ...]  # names to look up as definitions (last part if qualified)
    terms: tuple[str, ...]  # stemmed content terms
    path_words: tuple[str, ...]  # lower-case words to compare with file and folder names
    identifier_query: bool  # a symbol lookup rather than a question
    asks_for: frozenset[str]  # roles the query names ("test", "docs", …)
    fulltext: str  # what the full-text index is asked

    @property
    def empty(self) -> bool:
        return not self.terms and not self.identifiers


def analyze(query: str) -> QueryAnalysis:
    tokens = _TOKEN.findall(query)
    single = len(query.split()) == 1 and len(tokens) == 1
    identifiers: list[str] = []
    for token in tokens:
        if single or is_identifier(token):
            name = _QUALIFIED.split(token)[-1]
            identifiers.extend(n for n in (name, token) if n and n not in identifiers)
    identifier_query = single or (0 < len(tokens) <= 3
                                  and all(is_identifier(t) for t in tokens))
    path_words: list[str] = []
    for token in tokens:
        for part in [token, *query_parts(token)]:
            lowered = part.lower()
            if len(lowered) > 1 and lowered not in path_words and lowered not in _SKIP_PATH:
                path_words.append(lowered)
    lowered_words = {w.lower() for w in re.findall(r"[A-Za-z0-9]+", query)}
    asks_for = frozenset(role for role, names in ROLE_WORDS.items()
                         if lowered_words & set(names))
    extra = [p.lower() for t in tokens if is_identifier(t) or single
             for p in query_parts(t) or split_identifier(t)]
    fulltext = f"{query} {' '.join(dict.fromkeys(extra))}" if len(extra) > 1 else query
    return QueryAnalysis(query, tuple(identifiers), tuple(query_terms(query)),
                         tuple(w for w in path_words
                               if w not in STOP_WORDS and stem(w) not in STOP_WORDS),
                         identifier_query, asks_for, fulltext)

