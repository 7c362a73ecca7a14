"""What a search returns: one result per file, listing the matching line ranges."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SNIPPET_MAX_LINES = 12
MODES = ("vector", "lexical", "hybrid")


@dataclass(frozen=True)
class SearchFilters:
    """Restrict a search. Empty tuples mean "no restriction"."""

    paths: tuple[str, ...] = ()  # gitignore-style globs on workspace-relative paths
    languages: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    # Not a restriction: roles (docs, test, example…) the caller wants, so their ranking
    # priors do not apply (planning mode wants design documents).
    wanted_roles: tuple[str, ...] = ()


@dataclass
class LineRange:
    start_line: int  # 1-based
    end_line: int  # inclusive
    score: float
    # What this range is, so a list of a file's ranges can label each row by its own chunk
    # (not by the file's best one): its symbol and kind, and its first line of text.
    symbol: str = ""
    kind: str = ""
    preview: str = ""


@dataclass
class ChunkHit:
    """One indexed chunk that matched, before results are merged per file."""

    path: str
    start_line: int  # 1-based, inclusive
    end_line: int
    kind: str
    symbol: str
    language: str
    text: str
    score: float  # cosine (vector, hybrid) or BM25 (lexical)


@dataclass
class SearchResult:
    """A file that matched: its best chunk's range and every matching range, best first."""

    path: str  # POSIX, relative to the workspace root
    start_line: int
    end_line: int
    score: float
    kind: str
    symbol: str
    language: str
    ranges: list[LineRange]
    snippet: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SearchTimings:
    """Where one search's time went, in milliseconds: the parts a slow search is made of, so
    that a user (or a benchmark) can tell a slow model call from slow lookups or ranking.
    They need not add up to the search's time: opening the index at its current version,
    reading the query and its filters, drafted files, the cosines of full-text hits and a
    first attempt given up when the index was rebuilt under the search are in none of them."""

    query_embedding: float = 0.0  # the model's call (about 0 when cached; 0 if lexical)
    vector: float = 0.0  # nearest chunks by vector (0 if lexical)
    # Full-text and definition lookups, from their start to the last one's end, waits for
    # their threads included: they run beside the two above (0 if vector).
    lexical: float = 0.0
    # Scoring candidates (on a process's first search, sampling the workspace's background
    # for calibration too), grouping them into files, reading their snippets.
    ranking: float = 0.0

    def to_dict(self) -> dict:
        """For the command line's JSON (snake case, as the rest of it)."""
        return {f"{part}_ms": round(ms, 2) for part, ms in asdict(self).items()}

    def to_wire(self) -> dict:
        """For ``rag/search`` (camel case, as the protocol)."""
        return {"queryEmbeddingMs": round(self.query_embedding, 2),
                "vectorMs": round(self.vector, 2), "lexicalMs": round(self.lexical, 2),
                "rankingMs": round(self.ranking, 2)}


@dataclass
class SearchResponse:
    query: str
    mode: str  # the mode actually used ("lexical" when the model is unavailable)
    took_ms: float
    results: list[SearchResult]
    warnings: list[str] = field(default_factory=list)
    timings: SearchTimings = field(default_factory=SearchTimings)

    def to_dict(self) -> dict:
        return {
            "query": self.query,
            "mode": self.mode,
            "took_ms": round(self.took_ms, 2),
            "timings": self.timings.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "warnings": self.warnings,
        }


PREVIEW_MAX_CHARS = 120


def preview_of(text: str) -> str:
    """The first non-blank line of ``text``, trimmed to one short line."""
    line = next((line.strip() for line in text.split("\n") if line.strip()), "")
    return line if len(line) <= PREVIEW_MAX_CHARS else line[:PREVIEW_MAX_CHARS - 1] + "…"


def snippet_of(text: str, max_lines: int = SNIPPET_MAX_LINES) -> str:
    lines = text.split("\n")
    if len(lines) <= max_lines:
        return text
    return "\n".join(lines[:max_lines]) + "\n…"
