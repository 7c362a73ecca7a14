"""The ranking layer: one place where retrieved chunks become ordered, scored files.

Every rule is a named weight (a ``rank*`` setting in ``schemas/config.schema.json``), measured
one by one on the code-retrieval benchmark (``bench/README.md``, ablation table):

- **fusion by query type** — a chunk's base relevance is its semantic margin (cosine above the
  query's background similarity, see ``calibration``) plus its lexical coverage (share of the
  query's terms it contains, rarer terms weighing more) times ``rankLexicalWeight``, or
  ``rankIdentifierLexicalWeight`` for identifier-like queries (``Depends``, ``field_validator``),
  whose exact lexical hits count even when the cosine is low (their answerability is judged by
  their words alone);
- **definition evidence** (``rankDefinitionBoost``) — the chunk defines a queried name (half
  as much again when the file is named after it), or, for a name nothing in the workspace
  defines, re-exports it (where a sibling package's or a dependency's name enters);
- **path evidence** (``rankPathBoost``) — the file's name (and, half-weighted, its folder)
  matches the query's words; a module's index file (``routing/mod.rs``, ``__init__.py``,
  ``index.ts``) goes by its folder's name;
- **role priors** (``rank*Prior``) — tests, benchmark harnesses, docs, examples, legacy copies,
  generated code, data files, re-export modules and private modules (``_internal/``,
  ``private/``) are multiplied down, unless the query or a filter asks for them;
  a prior never takes a chunk that is relevant on its own evidence below the threshold (it
  then ranks after the implementation, at the threshold), so a documentation question still
  finds the documentation;
- **file agreement** (``rankFileAgreement``) — a file is scored by its best chunk plus a share
  of its other matching chunks, with diminishing returns (each next one counts 0.7 times the
  one before), so a file that answers in several places ranks above a one-off mention. A
  place is a definition (all its pieces, when it was cut to fit the model), a passage (a run
  of touching plain-text windows) or one long line: a long one does not win by being long.

The score a result shows is the score it was ranked by, squashed to 0..1 by ``1 - e^-x``. It is
calibrated — margins over background similarity, coverage of the query's own terms — so one
threshold means "relevant" in every query and workspace: nonsense scores near 0. A hybrid
search also needs one file whose own evidence (``RankedFile.relevance``, before priors)
reaches ``answerThreshold``, or it returns nothing (``pipeline.ranked_files``).
"""

from __future__ import annotations

import functools
import math
import operator
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from rag_lsp.chunking.definitions import symbol_name
from rag_lsp.config import Settings
from rag_lsp.search.calibration import Background
from rag_lsp.search.evidence import (
    PathMatcher,
    TermCoverage,
    defines_name,
    reexports_name,
    stem_is_name,
)
from rag_lsp.search.query import QueryAnalysis
from rag_lsp.search.results import SearchFilters
from rag_lsp.search.roles import REEXPORT_NAMES, ROLES, is_reexport_chunk, path_roles

# Cosine margin over the background treated as noise: random strings reach about this much.
SEMANTIC_FLOOR = 0.1
SEMANTIC_WEIGHT = 1.5  # relative to the weights of the other kinds of evidence
AGREEMENT_DECAY = 0.7  # each further chunk of a file counts this much of the one before
# Ordering a file's ranges, a chunk's siblings (pieces of one definition) add agreement, but
# only the best one: the pieces share their signature as context, so they agree with each
# other anyway, and a long function's 15 pieces would outrank the 5-line struct a query names
# (line-level first range 0.735 counting all, 0.794 counting one, 0.765 none).
RANGE_SIBLINGS = 1
FOLDER_SHARE = 0.5  # a folder-name match counts half a file-name match
NAMED_FILE_SHARE = 1.5  # a definition in a file named after the symbol counts this much more
# A name found on a definition-like line inside a chunk (grouped constants, a trait declared
# inside a macro) counts this share of the chunk whose own symbol is that name: the chunker
# read the latter from the syntax tree.
INNER_DEFINITION_SHARE = 0.5
# Is the query about this workspace at all? Two signs, measured on real and off-topic
# questions (bench/nonsense.py): its best semantic margin, and the share of its terms that
# occur in the workspace ("support"). Scores scale from nothing at ANSWERABLE_NONE to fully at
# ANSWERABLE_FULL of ``margin + SUPPORT_WEIGHT * support``; identifier queries, which are
# lexical lookups, by support alone (SUPPORT_NONE to SUPPORT_FULL).
ANSWERABLE_NONE = 0.33
ANSWERABLE_FULL = 0.43
SUPPORT_WEIGHT = 0.2
SUPPORT_NONE = 0.25
SUPPORT_FULL = 0.75
# Support counts this share for the query's terms occurring *together* in one place (the best
# file's coverage by its retrieved chunks and path, rarer terms weighing more) rather than
# anywhere in the workspace. A real question's words meet in the code that answers it; an
# off-topic one shares a word or two with the code base in another sense, each in a different
# place. Structural chunks made this matter: a definition alone in its chunk (a one-line type
# named after a common noun) matches that one word with the full cosine a 254-token window
# used to dilute. (One chunk as the place cost architecture questions, whose words spread
# over a file: code benchmark 0.8455 -> 0.8430.)
COHESION_SHARE = 0.5
# A name defined outside the workspace (a sibling package of a monorepo, a dependency) enters
# it where it is re-exported (``pub use core::extract::FromRequest``, ``export { getHooks }
# from '@vitest/runner'``): for a queried name nothing here defines, that chunk counts this
# share of a definition, and the re-export prior does not apply to it.
REEXPORT_SHARE = 1.0
# Name and definition evidence for a natural-language query counts fully only when the chunk
# itself is relevant to this degree (a lone word in a file name is weak evidence).
PATH_CORROBORATION = 0.2

# Setting → the value that switches the rule off (for ablations and for users who want to).
RULE_SETTINGS = {
    "rankLexicalWeight": 0.0,
    "rankIdentifierLexicalWeight": 0.0,
    "rankDefinitionBoost": 0.0,
    "rankPathBoost": 0.0,
    "rankFileAgreement": 0.0,
    "rankTestPrior": 1.0,
    "rankBenchmarkPrior": 1.0,
    "rankDocsPrior": 1.0,
    "rankExamplePrior": 1.0,
    "rankLegacyPrior": 1.0,
    "rankGeneratedPrior": 1.0,
    "rankDataPrior": 1.0,
    "rankReexportPrior": 1.0,
    "rankInternalPrior": 1.0,
}


@dataclass(frozen=True)
class RankingWeights:
    """The ``rank*`` settings (defaults live in the settings schema, nowhere else)."""

    lexical: float
    identifier_lexical: float
    definition: float
    path: float
    file_agreement: float
    priors: dict[str, float]

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> RankingWeights:
        settings = settings or Settings()
        return cls(
            settings.rank_lexical_weight, settings.rank_identifier_lexical_weight,
            settings.rank_definition_boost, settings.rank_path_boost,
            settings.rank_file_agreement,
            {role: getattr(settings, f"rank_{role}_prior") for role in ROLES},
        )


@dataclass
class Candidate:
    """One retrieved chunk with what the retrievers knew about it."""

    row: dict  # the chunk's stored columns
    cosine: float | None = None  # None in lexical search without the model
    relevance: float = 0.0  # evidence for the chunk, before role priors
    raw: float = 0.0  # ranking score (after priors), before squashing

    @functools.cached_property
    def path(self) -> str:  # (read some ten times a search for each candidate)
        return self.row["path"]

    @functools.cached_property
    def terms(self) -> frozenset[str]:
        """The chunk's stored terms, split once (coverage, support and cohesion all read
        them); a search keeps only its query's (:meth:`keep_terms`)."""
        return frozenset(self.row.get("terms", "").split())

    def keep_terms(self, wanted: Iterable[str]) -> None:
        """Hold as :attr:`terms` only those of ``wanted`` the chunk has: all that coverage,
        support and cohesion ask of a chunk is which of the query's terms it holds. Splitting
        every term of a drafted 40-line window (~110) cost ~5 ms a search at 100k chunks.
        (A row from the in-memory copy holds those alone already, its path's words with
        them: every reader of :attr:`terms` adds the path's words anyway.)"""
        padded = f" {self.row.get('terms', '')} "
        self.terms = frozenset(t for t in wanted if f" {t} " in padded)


@dataclass
class RankedFile:
    path: str
    raw: float
    chunks: list[Candidate]  # best first
    relevance: float = 0.0  # the same agreement of its chunks' own evidence, before priors

    @property
    def score(self) -> float:
        return squash(self.raw)


def squash(raw: float) -> float:
    return 1.0 - math.exp(-max(raw, 0.0))


def unsquash(score: float) -> float:
    """The raw score a 0..1 threshold corresponds to."""
    return -math.log(max(1e-9, 1.0 - min(score, 0.999999)))


@dataclass(frozen=True)
class RankContext:
    """Everything the rules need besides the candidates."""

    query: QueryAnalysis
    background: Background
    weights: RankingWeights
    semantic: bool  # vector evidence is used (vector and hybrid modes)
    lexical: bool  # term evidence is used (lexical and hybrid modes)
    noise: float = 0.0  # the query's background similarity
    answerable: float = 1.0  # 0..1: how much the query is about this workspace at all
    floor: float = 0.0  # the relevance threshold, as a raw score
    filters: SearchFilters = SearchFilters()


def _ramp(value: float, none: float, full: float) -> float:
    return min(1.0, max(0.0, (value - none) / (full - none)))


def answerable(q: QueryAnalysis, best_margin: float | None, support: float,
               cohesion: float | None = None) -> float:
    """How much a query is about the workspace (0..1), from its best cosine margin over the
    background (``None`` without vectors), the share of its terms the workspace has, and
    (``cohesion``) the weighted share that one file has."""
    if q.identifier_query or best_margin is None:
        return _ramp(support, SUPPORT_NONE, SUPPORT_FULL)
    if cohesion is not None:
        support = (1.0 - COHESION_SHARE) * support + COHESION_SHARE * cohesion
    return _ramp(best_margin + SUPPORT_WEIGHT * support, ANSWERABLE_NONE, ANSWERABLE_FULL)


def _unlocked_roles(ctx: RankContext) -> set[str]:
    """Roles the query or a filter asks for: their priors do not apply."""
    filters = ctx.filters
    unlocked = set(ctx.query.asks_for) | set(filters.wanted_roles)
    globs = " ".join(filters.paths).lower()
    for role, words in (("test", ("test", "spec", "e2e")), ("benchmark", ("bench",)),
                        ("docs", ("doc", ".md", "readme")),
                        ("example", ("example", "sample", "demo")),
                        ("legacy", ("legacy", "deprecated", "compat", "v1")),
                        ("internal", ("internal", "private"))):
        if any(w in globs for w in words):
            unlocked.add(role)
    if "section" in filters.kinds or {"markdown", "rst", "text"} & set(filters.languages):
        unlocked.add("docs")
    if {"json", "yaml", "toml", "ini", "xml"} & set(filters.languages):
        unlocked.add("data")
    return unlocked


def prior(candidate: Candidate, weights: RankingWeights, unlocked: set[str],
          entry_point: bool = False) -> float:
    """The role priors' product; a re-export that is where a queried name enters the
    workspace (``entry_point``) is not penalised as one."""
    roles = set(path_roles(candidate.path))
    if not entry_point and is_reexport_chunk(candidate.path, candidate.row.get("text", "")):
        roles.add("reexport")
    if "benchmark" in roles & unlocked:  # a harness kept among the tests is asked for whole
        roles.discard("test")
    factor = 1.0
    for role in roles - unlocked:
        factor *= weights.priors.get(role, 1.0)
    return factor


def _is_own_symbol(symbol: str, identifiers: tuple[str, ...]) -> bool:
    """Whether a queried name is the one the chunk's symbol defines (``Client.send`` for
    ``send``; the query analysis already split ``Router.handle`` into ``handle``)."""
    name = symbol_name(symbol)
    return bool(name) and any(i == name or (i.islower() and i == name.lower())
                              for i in identifiers)


def score_chunks(candidates: list[Candidate], ctx: RankContext) -> None:
    """Set each candidate's ``raw`` score (see the module docstring)."""
    q, w = ctx.query, ctx.weights
    unlocked = _unlocked_roles(ctx)
    lexical_weight = w.identifier_lexical if q.identifier_query else w.lexical
    coverage = TermCoverage(q.terms, ctx.background)
    path_cache: dict[str, float] = {}
    path_priors: dict[str, float] = {}  # of files that cannot be re-export modules
    match_path = PathMatcher(q.path_words)
    external = _external_names(candidates, q.identifiers) if w.definition else ()
    for c in candidates:
        base = 0.0
        if ctx.semantic and c.cosine is not None:
            base += SEMANTIC_WEIGHT * max(0.0, c.cosine - ctx.noise - SEMANTIC_FLOOR)
        if ctx.lexical:
            base += lexical_weight * coverage(c.terms, c.path)
        evidence = 0.0
        if q.identifiers and w.definition and defines_name(c.row.get("defines", ""),
                                                           q.identifiers):
            share = NAMED_FILE_SHARE if stem_is_name(c.path, q.identifiers) else 1.0
            if not _is_own_symbol(c.row.get("symbol", ""), q.identifiers):
                share *= INNER_DEFINITION_SHARE
            evidence += w.definition * share
        entry_point = bool(external) and reexports_name(c.row.get("text", ""), c.path, external)
        if entry_point:
            evidence += w.definition * REEXPORT_SHARE
        if w.path and c.path not in path_cache:
            in_name, in_folder = match_path(c.path)
            path_cache[c.path] = w.path * (in_name + FOLDER_SHARE * in_folder)
        evidence += path_cache.get(c.path, 0.0)
        if PATH_CORROBORATION and not q.identifier_query:
            evidence *= min(1.0, base / PATH_CORROBORATION)
        c.relevance = (base + evidence) * ctx.answerable
        if entry_point or c.path.rsplit("/", 1)[-1] in REEXPORT_NAMES:
            factor = prior(c, w, unlocked, entry_point)  # this chunk's text decides
        else:  # the same for every chunk of the file
            factor = path_priors.get(c.path)
            if factor is None:
                factor = path_priors[c.path] = prior(c, w, unlocked)
        c.raw = _respect_floor(c.relevance * factor, c.relevance, ctx.floor)


def text_needed(candidates: list[Candidate], q: QueryAnalysis,
                weights: RankingWeights) -> list[Candidate]:
    """The candidates whose text :func:`score_chunks` reads: chunks of files that may hold
    only re-exports (``is_reexport_chunk``), and all of them when a queried name is defined
    by none (``reexports_name``). Rows found in memory may come without their text (past
    its memory budget); the others are ranked without reading it."""
    if q.identifiers and weights.definition and _external_names(candidates, q.identifiers):
        return candidates
    return [c for c in candidates if c.path.rsplit("/", 1)[-1] in REEXPORT_NAMES]


def _external_names(candidates: list[Candidate], identifiers: tuple[str, ...]) -> tuple[str, ...]:
    """The queried names no retrieved chunk defines (the definition retriever looks them up
    by name, so a definition in the workspace would be among the candidates)."""
    defined = set()
    for c in candidates:
        names = c.row.get("defines", "")
        if names:
            defined.update(i for i in identifiers if i not in defined and defines_name(names, (i,)))
    return tuple(i for i in identifiers if i not in defined)


def _respect_floor(ranked: float, relevance: float, floor: float) -> float:
    """A prior ranks a result after implementation, but never hides one that its own
    evidence shows relevant: it stops at the relevance threshold (``floor``)."""
    return max(ranked, min(relevance, floor))


def _agreement(scores: list[float], weight: float) -> float:
    """Best score plus a share of the others, each next one counting less."""
    return scores[0] + weight * sum(s * AGREEMENT_DECAY ** k
                                    for k, s in enumerate(scores[1:], start=1))


# Chunk kinds whose pieces (one oversized definition or section split in parts) share a symbol.
_PIECE_KINDS = frozenset({"function", "method", "class", "constant", "section"})
# For file agreement a definition's pieces are one place; a long documentation section's are
# not: it takes several points in turn (doc questions: top 3 0.406 as one place, 0.500 apart;
# code benchmark 0.852 either way).
_ONE_PLACE_KINDS = _PIECE_KINDS - {"section"}


def _places(chunks: list[Candidate], piece_kinds: frozenset[str] = _PIECE_KINDS,
            passages: bool = True) -> list[list[Candidate]]:
    """Chunks grouped by the place they cover, for agreement and for ordering ranges.

    A place is a definition, or section, of one of ``piece_kinds`` (its pieces, when it was
    too big for one chunk, share kind and symbol), a run of touching or overlapping plain-text
    windows (one passage), or the pieces of one long line (a paragraph or minified code cut to
    fit the model). So a long definition or text does not win by being long, nor a title by
    being chunked apart from the abstract it heads: a file agrees with a query when several
    *different* places answer.
    Measured: code benchmark 0.845 -> 0.852 (architecture 0.778 -> 0.789), SciFact hybrid
    0.708 -> 0.727.

    ``piece_kinds`` are the kinds whose pieces group; ``passages`` groups windows."""
    split_lines = {c.row.get("start_line") for c in chunks
                   if c.row.get("start_line") is not None
                   and c.row.get("start_line") == c.row.get("end_line")}
    groups: dict[object, list[Candidate]] = {}
    windows = []
    for c in chunks:
        kind, symbol, end = c.row.get("kind"), c.row.get("symbol"), c.row.get("end_line")
        if passages and kind == "text" and c.row.get("start_line") is not None:
            windows.append(c)
            continue
        if kind in piece_kinds and symbol:
            key: object = (kind, symbol)
        elif end in split_lines:
            key = ("line", end)
        else:
            key = id(c)
        groups.setdefault(key, []).append(c)
    return list(groups.values()) + _window_runs(windows)


def _window_runs(windows: list[Candidate]) -> list[list[Candidate]]:
    """Plain-text windows grouped into runs that touch or overlap (one passage each)."""
    runs: list[list[Candidate]] = []
    end = None
    for c in sorted(windows, key=lambda c: (c.row["start_line"], c.row["end_line"])):
        if runs and c.row["start_line"] <= end + 1:
            runs[-1].append(c)
            end = max(end, c.row["end_line"])
        else:
            runs.append([c])
            end = c.row["end_line"]
    return runs


_by_raw = operator.attrgetter("raw")


def rank_files(candidates: list[Candidate], weights: RankingWeights,
               floor: float = 0.0, passages: bool = True) -> list[RankedFile]:
    """Files by best chunk plus agreement of their other places (``_places``; ``passages``
    false for lexical search alone); chunks best first."""
    by_file: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        by_file[c.path].append(c)
    files = []
    for path, chunks in by_file.items():
        if len(chunks) == 1:  # (most files) the agreement of one place is its score
            ranked, relevance = chunks[0].raw, chunks[0].relevance
        else:
            chunks.sort(key=_by_raw, reverse=True)
            if passages:
                groups = _places(chunks, _ONE_PLACE_KINDS)
            else:  # lexical search alone: each piece's coverage sees only its own words, and
                # their agreement stands in for the whole's (SciFact lexical 0.666; 0.645 as one)
                groups = _places(chunks, frozenset(), passages=False)
            ranked = _agreement(sorted((max(c.raw for c in g) for g in groups), reverse=True),
                                weights.file_agreement)
            relevance = _agreement(sorted((max(c.relevance for c in g) for g in groups),
                                          reverse=True), weights.file_agreement)
        files.append(RankedFile(path, _respect_floor(ranked, relevance, floor), chunks,
                                relevance))
    files.sort(key=lambda f: (-f.raw, f.path))
    return files


def order_ranges(chunks: list[Candidate], weights: RankingWeights) -> list[tuple[Candidate, float]]:
    """A file's chunks with the score that orders them, best first: a chunk's own score plus
    the agreement of its best sibling, so the first range shown is the best part of the
    definition (or passage) that answers best, not a lone lucky piece."""
    scored = []
    for group in _places(chunks):
        raws = sorted((c.raw for c in group), reverse=True)
        for c in group:
            others = list(raws)
            others.remove(c.raw)
            others = others[:RANGE_SIBLINGS]
            scored.append((c, _agreement([c.raw, *others], weights.file_agreement)))
    scored.sort(key=lambda pair: -pair[1])
    return scored
