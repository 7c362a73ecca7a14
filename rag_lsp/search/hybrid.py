"""Hybrid retrieval: vector and full-text candidates fused by reciprocal rank.

Scores: in ``vector`` and ``hybrid`` mode a result's score is the cosine similarity of its
best chunk to the query (comparable across queries, so the threshold means something);
hybrid mode *ranks* by fused rank. In ``lexical`` mode the score is BM25 and no threshold
applies.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pathspec

from rag_lsp.search.results import ChunkHit, LineRange, SearchFilters, SearchResult, snippet_of
from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.store.sql import all_of, in_list

RRF_K = 60  # the usual constant; damps the head of each list
# Chunks fetched per list, relative to the files wanted: several chunks per file merge into
# one result, and the threshold may drop some.
CANDIDATES_PER_RESULT = 5
MIN_CANDIDATES = 50

MODES = ("vector", "lexical", "hybrid")
_FULL_TEXT = ThreadPoolExecutor(2, thread_name_prefix="rag-fts")


def filter_clause(store: ChunkStore, filters: SearchFilters) -> str | None:
    """A LanceDB prefilter for ``filters``; path globs are resolved against indexed paths."""
    path_clause = None
    if filters.paths:
        spec = pathspec.GitIgnoreSpec.from_lines(filters.paths)
        matching = [p for p in store.file_records() if spec.match_file(p)]
        path_clause = in_list("path", matching)
    return all_of(
        path_clause,
        in_list("language", filters.languages) if filters.languages else None,
        in_list("kind", filters.kinds) if filters.kinds else None,
    )


def rrf_fuse(*ranked_lists: list[str], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion of lists of ids (best first) → fused score per id."""
    fused: dict[str, float] = {}
    for ranked in ranked_lists:
        for rank, key in enumerate(ranked):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank + 1)
    return fused


def search_chunks(
    store: ChunkStore,
    query: str,
    *,
    mode: str,
    top_k: int,
    threshold: float,
    filters: SearchFilters,
    embed_query: Callable[[str], np.ndarray] | None,
) -> list[SearchResult]:
    """Ranked, per-file-merged results for ``query``."""
    limit = max(MIN_CANDIDATES, top_k * CANDIDATES_PER_RESULT)
    hits = rank_chunks(store, query, mode=mode, limit=limit, threshold=threshold,
                       filters=filters, embed_query=embed_query)
    return merge_by_file(hits, top_k)


def rank_chunks(
    store: ChunkStore,
    query: str,
    *,
    mode: str,
    limit: int,
    threshold: float,
    filters: SearchFilters,
    embed_query: Callable[[str], np.ndarray] | None,
) -> list[ChunkHit]:
    """Chunks relevant to ``query``, best first (up to ``limit`` from each retriever)."""
    where = filter_clause(store, filters)
    if where == "(false)":
        return []
    rows: dict[str, dict] = {}
    vector_ids: list[str] = []
    text_ids: list[str] = []
    # The full-text search runs beside embedding + vector search (both release the GIL).
    text_rows = (_FULL_TEXT.submit(store.text_search, query, limit, where)
                 if mode != "vector" else None)
    query_vector = embed_query(query) if mode != "lexical" and embed_query else None
    if query_vector is not None:
        for row in store.vector_search(query_vector, limit, where):
            rows[row["id"]] = row
            vector_ids.append(row["id"])
    if text_rows is not None:
        for row in text_rows.result():
            row.setdefault("cosine", None)
            rows.setdefault(row["id"], row)
            rows[row["id"]]["bm25"] = float(row.get("_score", 0.0))
            text_ids.append(row["id"])

    if mode == "lexical":
        order = text_ids
        score_of = {i: rows[i]["bm25"] for i in order}
    else:
        if query_vector is not None:
            for key in text_ids:  # lexical-only hits still get a real similarity
                if rows[key].get("cosine") is None:
                    vec = np.asarray(rows[key]["vector"], dtype=np.float32)
                    rows[key]["cosine"] = float(vec @ query_vector)
        fused = rrf_fuse(vector_ids, text_ids) if mode == "hybrid" else rrf_fuse(vector_ids)
        order = [i for i in sorted(fused, key=fused.get, reverse=True)
                 if rows[i]["cosine"] >= threshold]
        score_of = {i: rows[i]["cosine"] for i in order}
    return [
        ChunkHit(
            path=rows[i]["path"], start_line=int(rows[i]["start_line"]),
            end_line=int(rows[i]["end_line"]), kind=rows[i]["kind"], symbol=rows[i]["symbol"],
            language=rows[i]["language"], text=rows[i]["text"],
            score=round(float(score_of[i]), 6),
        )
        for i in order
    ]


def merge_by_file(hits: list[ChunkHit], top_k: int) -> list[SearchResult]:
    """One result per file, in order of its best chunk; ranges listed best first."""
    results: dict[str, SearchResult] = {}
    for hit in hits:
        score = hit.score
        line_range = LineRange(hit.start_line, hit.end_line, score)
        existing = results.get(hit.path)
        if existing is not None:
            if not any(r.start_line == line_range.start_line for r in existing.ranges):
                existing.ranges.append(line_range)
            continue
        if len(results) == top_k:
            continue
        results[hit.path] = SearchResult(
            path=hit.path,
            start_line=line_range.start_line,
            end_line=line_range.end_line,
            score=score,
            kind=hit.kind,
            symbol=hit.symbol,
            language=hit.language,
            ranges=[line_range],
            snippet=snippet_of(hit.text),
        )
    return list(results.values())
