"""A search from query to results: retrieve candidates, rank them, keep what is relevant.

Retrievers (each optional by mode): nearest chunks by vector, full-text matches of the query
(with the parts of its identifiers), chunks that *define* a queried identifier, and, while a
first index runs, windows of the files not embedded yet (``rag_lsp.store.draft``). The
ranking layer (``ranking.py``) scores every candidate and groups them into files; the
threshold applies to that same score, and a hybrid search returns nothing unless its best
file's own evidence reaches the answer threshold (see ``ranked_files``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pathspec

from rag_lsp.globs import compile_globs
from rag_lsp.search.calibration import Background, BackgroundCache
from rag_lsp.search.evidence import TermCoverage
from rag_lsp.search.query import QueryAnalysis, analyze
from rag_lsp.search.ranking import (
    Candidate,
    RankContext,
    RankedFile,
    RankingWeights,
    answerable,
    order_ranges,
    rank_files,
    score_chunks,
    squash,
    text_needed,
    unsquash,
)
from rag_lsp.search.results import (
    ChunkHit,
    LineRange,
    SearchFilters,
    SearchResult,
    SearchTimings,
    preview_of,
    snippet_of,
)
from rag_lsp.store.draft import DraftIndex, is_drafted, is_gone
from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.store.sql import all_of, in_list
from rag_lsp.terms import path_terms

# Chunks fetched per retriever: several chunks of a file merge into one result, and file
# agreement needs a file's other matching chunks.
MIN_CANDIDATES = 70
CANDIDATES_PER_RESULT = 5
DEFINITION_CANDIDATES = 20
# A retriever whose rows were more than a quarter of deleted files (until their update
# lands: see _visible_rows) asks again for more, up to this many times its limit.
HIDDEN_REFETCH_MAX = 8
# Read the vectors of full-text hits to give them a real cosine (else they get no semantic
# evidence: they were not among the nearest chunks anyway).
LEXICAL_COSINES = True
_FULL_TEXT = ThreadPoolExecutor(2, thread_name_prefix="rag-fts")


@dataclass
class SearchIndex:
    """What a search needs from its workspace."""

    store: ChunkStore
    embed_query: Callable[[str], np.ndarray] | None  # None without the model
    background: BackgroundCache
    weights: RankingWeights
    draft: DraftIndex | None = None  # new files not embedded yet, by their words


def _glob_spec(globs: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return compile_globs(globs, "the path filter")


def filter_clause(store: ChunkStore, filters: SearchFilters) -> str | None:
    """A LanceDB prefilter for ``filters``; path globs are resolved against indexed paths."""
    path_clause = None
    if filters.paths:
        spec = _glob_spec(filters.paths)
        matching = [p for p in store.file_records() if spec.match_file(p)]
        path_clause = in_list("path", matching)
    return all_of(
        path_clause,
        in_list("language", filters.languages) if filters.languages else None,
        in_list("kind", filters.kinds) if filters.kinds else None,
    )


def draft_filter(filters: SearchFilters) -> Callable[[dict], bool] | None:
    """``filters``' paths and languages applied to a drafted window's row (see
    :func:`filter_clause`). A kind filter takes no drafts: a kind is what the chunker finds,
    and a drafted file has not been chunked yet."""
    if not (filters.paths or filters.languages):
        return None
    spec = _glob_spec(filters.paths) if filters.paths else None
    return lambda row: ((spec is None or spec.match_file(row["path"]))
                        and (not filters.languages or row["language"] in filters.languages))


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def _retrieve(index: SearchIndex, q: QueryAnalysis, mode: str, limit: int, where: str | None,
              filters: SearchFilters, timings: SearchTimings
              ) -> tuple[list[Candidate], np.ndarray | None]:
    store = index.store
    lexical = mode != "vector"
    # A drafted file's stored chunks (if any) are of its text before a save: those it still
    # holds are shown where they are now, the rest of it is its drafted windows. A vector
    # search (or one for a kind of chunk, which drafts are not) has only the stored chunks to
    # go by: the others as they were, except for a file deleted, or under a folder deleted
    # (every search).
    draft = index.draft
    view = draft.view() if draft else None  # (an empty draft is no draft)
    shadow = view if view is not None and lexical and not filters.kinds else None
    gone = view.gone if view is not None else frozenset()

    def lost(path: str) -> bool:
        return bool(gone) and is_gone(path, gone)

    def shown(row: dict) -> dict | None:
        if lost(row["path"]):
            return None
        if shadow is not None:
            return shadow.moved_row(row)
        return (view.moved_row(row) or row) if view is not None else row

    drafted = (draft.search(q.terms, q.identifiers, limit, draft_filter(filters))
               if draft is not None and shadow is not None else [])
    if where == "(false)":  # no indexed file passes the filters; drafted ones may
        return _with_query_terms([Candidate(row) for row in drafted], q), None
    # Full-text and definition lookups run beside embedding + vector search (both release
    # the GIL).
    with_vectors = mode == "hybrid" and LEXICAL_COSINES
    lookups_start = time.perf_counter()
    lookup_ends: list[float] = []  # appended from the lookup threads (atomic), read after

    def lookup_timed(rows: list[dict]) -> list[dict]:
        lookup_ends.append(time.perf_counter())
        return rows

    def full_text(n: int) -> list[dict]:
        return lookup_timed(store.text_search(q.fulltext, n, where, with_vectors=with_vectors,
                                              terms=q.terms))

    def definitions(n: int) -> list[dict]:
        return lookup_timed(store.text_search(" ".join(q.identifiers), n, where,
                                              column="defines", with_vectors=with_vectors,
                                              terms=q.terms))

    text_rows = (_FULL_TEXT.submit(_visible_rows, full_text, limit, shown, lost)
                 if lexical else None)
    definition_rows = (_FULL_TEXT.submit(_visible_rows, definitions, DEFINITION_CANDIDATES,
                                         shown, lost)
                       if lexical and q.identifiers and DEFINITION_CANDIDATES else None)
    query_vector = None
    if mode != "lexical" and index.embed_query is not None:
        started = time.perf_counter()
        query_vector = index.embed_query(q.text)
        timings.query_embedding = _ms_since(started)
    found: dict[str, Candidate] = {}
    if query_vector is not None:
        started = time.perf_counter()
        for row in _visible_rows(lambda n: store.vector_search(query_vector, n, where,
                                                               terms=q.terms),
                                 limit, shown, lost):
            found[row["id"]] = Candidate(row, row["cosine"])
        timings.vector = _ms_since(started)
    for future in (text_rows, definition_rows):
        for row in future.result() if future is not None else ():
            if row["id"] in found:
                continue
            vector = row.pop("vector", None)
            cosine = (float(np.asarray(vector, dtype=np.float32) @ query_vector)
                      if query_vector is not None and vector is not None else None)
            found[row["id"]] = Candidate(row, cosine)
    if lookup_ends:
        timings.lexical = (max(lookup_ends) - lookups_start) * 1000
    for row in drafted:  # no vectors yet: word evidence alone
        found[row["id"]] = Candidate(row)
    candidates = list(found.values())
    if view is not None:
        candidates = _one_per_place(candidates, view.moved)
    return _with_query_terms(candidates, q), query_vector


def _one_per_place(candidates: list[Candidate], moved: Mapping[str, object]) -> list[Candidate]:
    """``candidates`` less any stored chunk of a drafted file shown at the lines of another:
    chunks written since the draft was made are placed by their content, and an update may
    have written more copies of a text than the file now holds (rare: a save during the
    update of an earlier one)."""
    seen: set[tuple[str, int, int]] = set()
    kept = []
    for candidate in candidates:
        row = candidate.row
        if row["path"] in moved and not is_drafted(row):
            place = (row["path"], row["start_line"], row["end_line"])
            if place in seen:
                continue
            seen.add(place)
        kept.append(candidate)
    return kept


def _visible_rows(fetch: Callable[[int], list[dict]], limit: int,
                  shown: Callable[[dict], dict | None],
                  lost: Callable[[str], bool]) -> list[dict]:
    """Up to ``limit`` rows of ``fetch(n)`` (a retriever's best ``n``), best first, as
    ``shown`` shows them (``None``: set aside). The index holds a deleted or saved file's old
    chunks until its update lands, and they are set aside only once found. A saved file's
    drafted windows take the places of its chunks that changed; a deleted file's places are
    ``lost``, and a deleted folder could take every one (a search for what it held found
    nothing else). So while lost places leave fewer than three quarters of ``limit``, ask
    again for more (as many more as were lost, twice over), up to ``HIDDEN_REFETCH_MAX`` times
    ``limit``, or until the retriever has no more. A few places lost cost little: the
    candidates run deep (70 for 10 results)."""
    asked = limit
    enough = limit - limit // 4
    while True:
        rows = fetch(asked)
        visible = [shown_row for shown_row in map(shown, rows) if shown_row is not None]
        places_lost = sum(1 for row in rows if lost(row["path"]))
        # Fewer rows than asked: the retriever has no more (or rows went between their finding
        # and the read of their columns, which the store leaves out): stop there.
        if (len(rows) - places_lost >= enough or len(rows) < asked
                or asked >= limit * HIDDEN_REFETCH_MAX):
            return visible[:limit]
        asked = min(limit * HIDDEN_REFETCH_MAX, asked + 2 * places_lost)


def _with_query_terms(candidates: list[Candidate], q: QueryAnalysis) -> list[Candidate]:
    """``candidates``, each holding only the query's terms it has (all ranking asks)."""
    for candidate in candidates:
        candidate.keep_terms(q.terms)
    return candidates


def query_support(q: QueryAnalysis, candidates: list[Candidate],
                  in_sample: Callable[[str], bool]) -> float:
    """Share of the query's terms that occur in the workspace (in a retrieved chunk or in the
    background sample). Real questions about a code base use its words; "how are rainbows
    formed" or a string of random letters mostly do not."""
    if not q.terms:
        return 1.0
    missing = set(q.terms)
    paths = set()
    for c in candidates:
        missing.difference_update(c.terms)
        paths.add(c.path)
    for path in paths:  # (each file's path once, until every term is found)
        if not missing:
            break
        missing.difference_update(path_terms(path))
    return sum(1 for t in q.terms if t not in missing or in_sample(t)) / len(q.terms)


def query_cohesion(q: QueryAnalysis, candidates: list[Candidate], background: Background) -> float:
    """The largest share of the query's terms (rarer ones weighing more) that one file's
    retrieved chunks and path cover together: do the query's words meet in one place, or does
    each occur somewhere else?"""
    coverage = TermCoverage(q.terms, background)
    by_file: dict[str, set[str]] = {}
    for c in candidates:
        terms = by_file.get(c.path)
        if terms is None:
            by_file[c.path] = set(c.terms)
        else:
            terms.update(c.terms)
    return max((coverage(terms, path) for path, terms in by_file.items()), default=0.0)


def ranked_files(index: SearchIndex, query: str, *, mode: str, limit: int,
                 filters: SearchFilters, floor: float = 0.0, answer_floor: float = 0.0,
                 timings: SearchTimings | None = None) -> list[RankedFile]:
    """Every candidate file, best first, with raw scores (no cut; ``floor`` is the threshold
    as a raw score, which role priors respect), or none when no file's own evidence reaches
    ``answer_floor`` (the query is not about this workspace). ``timings``: filled in with
    where the time went (ranking: from the candidates on)."""
    timings = SearchTimings() if timings is None else timings
    where = filter_clause(index.store, filters)
    if where == "(false)" and not index.draft:
        return []
    q = analyze(query)
    candidates, query_vector = _retrieve(index, q, mode, limit, where, filters, timings)
    ranking_start = time.perf_counter()
    try:
        return _ranked(index, q, candidates, query_vector, mode=mode, filters=filters,
                       floor=floor, answer_floor=answer_floor)
    finally:
        timings.ranking += _ms_since(ranking_start)


def _ranked(index: SearchIndex, q: QueryAnalysis, candidates: list[Candidate],
            query_vector: np.ndarray | None, *, mode: str, filters: SearchFilters,
            floor: float, answer_floor: float) -> list[RankedFile]:
    if not candidates:
        return []
    background = index.background.get(index.store)
    noise = background.similarity(query_vector) if query_vector is not None else 0.0
    cosines = [c.cosine for c in candidates if c.cosine is not None]
    best_margin = max(cosines) - noise if cosines else None
    if any(is_drafted(c.row) for c in candidates):
        # The margin sees only the part of the workspace embedded so far: the drafted rest
        # is judged by its words, as a lexical search is. So is a saved file's new text until
        # its update lands: with the stored chunks' margin, a search for a function just
        # written found nothing.
        best_margin = None
    ctx = RankContext(
        q, background, index.weights,
        semantic=query_vector is not None, lexical=mode != "vector", noise=noise,
        answerable=answerable(q, best_margin, query_support(q, candidates, background.knows),
                              query_cohesion(q, candidates, background) if q.terms else None),
        filters=filters, floor=max(floor, 0.0),
    )
    index.store.fill_text(c.row for c in text_needed(candidates, q, index.weights))
    score_chunks(candidates, ctx)
    files = rank_files(candidates, index.weights, ctx.floor, passages=ctx.semantic)
    # The answer threshold is set on hybrid evidence, the default mode: a real question has
    # both a semantic margin and its words in the code. Vector or lexical evidence alone
    # scores on a lower scale (code benchmark lexical 0.789 -> 0.754 with it), and so does a
    # file drafted before its embeddings exist: a search that retrieves any (during a first
    # index) keeps the threshold alone, as those modes do.
    gated = answer_floor > 0 and ctx.semantic and ctx.lexical and best_margin is not None
    if gated and max(f.relevance for f in files) < answer_floor:
        return []
    return files


def _floors(threshold: float, answer_threshold: float) -> tuple[float, float]:
    """The threshold and the answer threshold as raw scores (threshold 0: no cut at all)."""
    if threshold <= 0:
        return float("-inf"), 0.0
    return unsquash(threshold), unsquash(answer_threshold) if answer_threshold > 0 else 0.0


def search_files(index: SearchIndex, query: str, *, mode: str, top_k: int, threshold: float,
                 filters: SearchFilters, answer_threshold: float = 0.0,
                 timings: SearchTimings | None = None) -> list[SearchResult]:
    """The ``top_k`` most relevant files scoring at least ``threshold`` (0..1), if the best
    reaches ``answer_threshold`` on its own evidence. ``timings``: see :func:`ranked_files`."""
    timings = SearchTimings() if timings is None else timings
    limit = max(MIN_CANDIDATES, top_k * CANDIDATES_PER_RESULT)
    floor, answer_floor = _floors(threshold, answer_threshold)
    shown = []
    for ranked in ranked_files(index, query, mode=mode, limit=limit, filters=filters,
                               floor=floor, answer_floor=answer_floor, timings=timings):
        if ranked.raw < floor or len(shown) == top_k:
            break
        shown.append(ranked)
    started = time.perf_counter()
    index.store.fill_text(c.row for ranked in shown for c in ranked.chunks)
    results = [_result(ranked, floor, index.weights) for ranked in shown]
    timings.ranking += _ms_since(started)
    return results


def search_chunks(index: SearchIndex, query: str, *, mode: str, limit: int, threshold: float,
                  filters: SearchFilters, answer_threshold: float = 0.0) -> list[ChunkHit]:
    """Chunks scoring at least ``threshold``, best first (the material for context packing),
    if the best file reaches ``answer_threshold``; a chunk's score is its own, not its
    file's."""
    floor, answer_floor = _floors(threshold, answer_threshold)
    chunks = [c for f in ranked_files(index, query, mode=mode, limit=limit, filters=filters,
                                      floor=floor, answer_floor=answer_floor)
              for c in f.chunks if c.raw >= floor]
    chunks.sort(key=lambda c: -c.raw)
    index.store.fill_text(c.row for c in chunks[:limit])
    return [_hit(c) for c in chunks[:limit]]


def _result(ranked: RankedFile, floor: float, weights: RankingWeights) -> SearchResult:
    ordered = order_ranges(ranked.chunks, weights)
    best = ordered[0][0]
    seen: set[int] = set()
    ranges = []
    for c, score in ordered:  # best first; the best always, the others when relevant
        start = int(c.row["start_line"])
        if start in seen or (ranges and score < floor):
            continue
        seen.add(start)
        ranges.append(LineRange(start, int(c.row["end_line"]), round(squash(score), 6),
                                symbol=c.row["symbol"], kind=c.row["kind"],
                                preview=preview_of(c.row["text"])))
    return SearchResult(
        path=ranked.path, start_line=ranges[0].start_line, end_line=ranges[0].end_line,
        score=round(ranked.score, 6), kind=best.row["kind"], symbol=best.row["symbol"],
        language=best.row["language"], ranges=ranges, snippet=snippet_of(best.row["text"]),
    )


def _hit(c: Candidate) -> ChunkHit:
    row = c.row
    return ChunkHit(path=row["path"], start_line=int(row["start_line"]),
                    end_line=int(row["end_line"]), kind=row["kind"], symbol=row["symbol"],
                    language=row["language"], text=row["text"], score=round(squash(c.raw), 6))
