"""The ANN index that answers past 50,000 chunks, against exact search, on a real index.

Copies an index's chunks table (``--index``: a folder with ``chunks.lance``, e.g. the one
``server_latency.py --files 4250`` builds), reads every vector into memory for exact search
(the in-memory matrix's way), builds the ANN index as the store does
(``rag_lsp.store.vector_index``; trained on every row, where a store trains on the rows it
has when the index is built and again at each doubling) and, for ``--queries`` queries of the
generator's vocabulary embedded by the real model, compares the ``limit`` nearest chunks
LanceDB returns with the exact ones: recall@10 (the first ten) and recall@70 (the candidates
a search ranks), latency, and that the cosines returned are the exact ones. Then the same
with filters (a few files, one language, most files), against LanceDB's exhaustive scan,
which is what a filtered search did before. ``--sweep`` also tries other ``nprobes`` /
``refine_factor`` values. ``--segments N`` then rewrites 1 % of the rows and compacts, N
times, as edits and their ``optimize`` do (each leaves a segment in the index), timing the
store's vector query (result columns included) as the segments pile up, and again once the
index is trained anew, as the store does past ``MAX_SEGMENTS`` (but without the store's
compactions around it: on the table as the edits left it).

``--kinds rq,sq`` measures each kind of index in turn on the same table and queries (``rq``:
RaBitQ, what the store builds since the fortieth session; ``sq``: 8-bit scalar
quantisation, what it built before), with its size on disk and what LanceDB's cache holds
after the store's vector queries; the last kind named stays for the filtered and segment
measurements. ``--index`` takes several index folders: their chunks go into one table
(compacted, as the store's are), e.g. the code benchmark's indexes of real repositories.

    .venv/bin/python bench/vector_index.py --index /tmp/bench/lat100k/index/ws-*
    .venv/bin/python bench/vector_index.py --kinds sq,rq --index <cache>/index/default/*
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import lancedb
import numpy as np
from lancedb.index import IvfSq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_latency import emit, log, make_queries  # noqa: E402

from rag_lsp.blas_threads import use_one_blas_thread  # noqa: E402
from rag_lsp.embedding.embedder import OnnxEmbedder  # noqa: E402
from rag_lsp.search.pipeline import MIN_CANDIDATES  # noqa: E402
from rag_lsp.store import lance_caches, vector_index  # noqa: E402
from rag_lsp.store.lance_queries import nearest_rows  # noqa: E402
from rag_lsp.store.lance_store import RESULT_COLUMNS  # noqa: E402
from rag_lsp.store.sql import in_list  # noqa: E402


def exact_top(matrix: np.ndarray, row_ids: np.ndarray, query: np.ndarray,
              limit: int) -> list[int]:
    scores = matrix @ query
    top = np.argpartition(-scores, limit)[:limit]
    return row_ids[top[np.argsort(-scores[top])]].tolist()


def measure(table, matrix: np.ndarray, row_ids: np.ndarray, queries: np.ndarray,
            nprobes: int, refine: int | None) -> dict:
    latencies, recall10, recall70, worst_cosine = [], [], [], 0.0
    position = {int(r): i for i, r in enumerate(row_ids)}
    for query in queries:
        started = time.perf_counter()
        builder = (table.search(query, vector_column_name="vector").metric("cosine")
                   .minimum_nprobes(nprobes).maximum_nprobes(0)
                   .select(["id", "_distance"]).with_row_id(True).limit(MIN_CANDIDATES))
        if refine:
            builder = builder.refine_factor(refine)
        found = builder.to_arrow()
        latencies.append((time.perf_counter() - started) * 1000)
        got = found.column("_rowid").to_pylist()
        exact = exact_top(matrix, row_ids, query, MIN_CANDIDATES)
        recall10.append(len(set(got[:10]) & set(exact[:10])) / 10)
        recall70.append(len(set(got) & set(exact)) / MIN_CANDIDATES)
        cosines = 1.0 - found.column("_distance").to_numpy()
        true = matrix[[position[r] for r in got]] @ query
        worst_cosine = max(worst_cosine, float(np.abs(cosines - true).max()))
    warm = latencies[5:]
    return {"nprobes": nprobes, "refine_factor": refine,
            "recall_at_10": round(float(np.mean(recall10)), 4),
            "recall_at_70": round(float(np.mean(recall70)), 4),
            "p50_ms": round(float(np.percentile(warm, 50)), 1),
            "p95_ms": round(float(np.percentile(warm, 95)), 1),
            "max_cosine_error": round(worst_cosine, 6)}


def filtered_search(table, queries: np.ndarray, where: str) -> dict:
    """The store's filtered query against LanceDB's exhaustive scan of the rows that pass."""
    def nearest(query: np.ndarray, exhaustive: bool) -> list[str]:
        builder = table.search(query, vector_column_name="vector").metric("cosine")
        builder = (builder.bypass_vector_index() if exhaustive
                   else vector_index.approximate(builder))
        return (builder.where(where, prefilter=True).select(["id"]).limit(MIN_CANDIDATES)
                .to_arrow().column("id").to_pylist())

    ms: dict[bool, list[float]] = {True: [], False: []}
    recall = []
    for query in queries:
        got = {}
        for exhaustive in (True, False):
            started = time.perf_counter()
            got[exhaustive] = nearest(query, exhaustive)
            ms[exhaustive].append((time.perf_counter() - started) * 1000)
        recall.append(len(set(got[False]) & set(got[True])) / max(1, len(got[True])))
    return {"recall_at_70": round(float(np.mean(recall)), 4),
            "p50_ms": round(float(np.percentile(ms[False], 50)), 1),
            "p95_ms": round(float(np.percentile(ms[False], 95)), 1),
            "scan_p50_ms": round(float(np.percentile(ms[True], 50)), 1),
            "scan_p95_ms": round(float(np.percentile(ms[True], 95)), 1)}


def store_query_ms(table, queries: np.ndarray) -> dict:
    """p50 / p95 of the store's vector query (``ChunkStore.vector_search`` past the size)."""
    ms = []
    for query in queries:
        started = time.perf_counter()
        nearest_rows(table, query, columns=[*RESULT_COLUMNS, "_distance"],
                     limit=MIN_CANDIDATES, where=None, tune=vector_index.approximate)
        ms.append((time.perf_counter() - started) * 1000)
    warm = ms[5:]
    return {"p50_ms": round(float(np.percentile(warm, 50)), 1),
            "p95_ms": round(float(np.percentile(warm, 95)), 1)}


KINDS = ("rq", "sq")


def build(table, kind: str, rows: int) -> float:
    """Seconds to build the ANN index of ``kind`` on ``table`` (the one before dropped):
    ``rq`` as the store does, ``sq`` as it did before the fortieth session."""
    config = (None if kind == "rq"
              else IvfSq(distance_type="cosine", sample_rate=vector_index.SAMPLE_RATE))
    started = time.perf_counter()
    vector_index.build_vector_index(table, rows, config)
    return time.perf_counter() - started


def ann_index_mb(table) -> float:
    """Size of the table's ANN index on disk (its full-text indexes left out)."""
    return round(sum(index.size_bytes or 0 for index in table.list_indices()
                     if tuple(index.columns) == ("vector",)) / 2**20, 1)


def cache_after_queries(folder: Path, queries: np.ndarray) -> dict:
    """The store's vector query through a fresh connection with caches as the store sizes
    them: p50 / p95, and what LanceDB's caches hold after the queries."""
    table = lancedb.connect(str(folder)).open_table("chunks")
    session = lance_caches.new_session(lance_caches.index_cache_bytes(table.count_rows()))
    table = lance_caches.connect(folder, session).open_table("chunks")
    return {**store_query_ms(table, queries), "cache_mb": round(session.size_bytes / 2**20, 1)}


def segment_growth(table, queries: np.ndarray, edits: int, kind: str) -> list[dict]:
    """The vector query as edits pile segments into the index, then after a new training."""
    rng = np.random.default_rng(3)
    ids = table.search().select(["id"]).limit(None).to_arrow().column("id").to_pylist()
    points = {1, edits, *range(0, edits + 1, max(1, edits // 4))} - {0}
    growth = [{"segments": vector_index.index_segments(table), **store_query_ms(table, queries)}]
    for edit in range(1, edits + 1):
        chosen = in_list("id", rng.choice(ids, len(ids) // 100, replace=False).tolist())
        rows = table.search().where(chosen).limit(None).to_arrow()
        table.delete(chosen)
        table.add(rows)  # the same chunks, as a save that changed nothing in them
        table.optimize()
        if edit in points:
            segments = vector_index.index_segments(table)
            log(f"edit {edit}: {segments} segments")
            growth.append({"segments": segments, **store_query_ms(table, queries)})
    seconds = build(table, kind, table.count_rows())
    growth.append({"segments": vector_index.index_segments(table), "trained_again": True,
                   "build_seconds": round(seconds, 1),
                   **store_query_ms(table, queries)})
    return growth


def copied_table(indexes: list[Path], copy: Path):
    """The chunks of ``indexes`` in one table at ``copy``, compacted as the store's are."""
    shutil.rmtree(copy, ignore_errors=True)
    log(f"copying {indexes[0] / 'chunks.lance'}")
    shutil.copytree(indexes[0] / "chunks.lance", copy / "chunks.lance")
    table = lancedb.connect(str(copy)).open_table("chunks")
    for index in indexes[1:]:
        log(f"adding the chunks of {index / 'chunks.lance'}")
        table.add(lancedb.connect(str(index)).open_table("chunks").to_arrow())
    for found in table.list_indices():  # what the first copy brought: each kind is built here
        if tuple(found.columns) == ("vector",):
            table.drop_index(found.name)
    if len(indexes) > 1:
        table.optimize()  # (an ANN index would have kept the added rows' fragments apart)
    return table


def read_queries(path: Path, limit: int) -> list[str]:
    queries = [line.strip() for line in path.read_text("utf-8").splitlines() if line.strip()]
    if not queries:
        raise SystemExit(f"{path} holds no queries: give one a line")
    return queries[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True, nargs="+",
                        help="an index folder, or several: their chunks in one table")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench/vector-index"),
                        help="where the table is copied (default: %(default)s)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--queries-from", type=Path, metavar="FILE",
                        help="queries one a line (default: --queries of the generator's words)")
    parser.add_argument("--kinds", default="rq", help="kinds of index measured in turn, "
                        f"comma-separated, of {', '.join(KINDS)} (default: %(default)s)")
    parser.add_argument("--sweep", action="store_true", help="other nprobes/refine values")
    parser.add_argument("--segments", type=int, default=0, metavar="N",
                        help="then N edits, each leaving a segment in the index (see above)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "vector_index.json")
    args = parser.parse_args()
    kinds = [kind.strip() for kind in args.kinds.split(",") if kind.strip()]
    if not kinds or set(kinds) - set(KINDS):
        parser.error(f"--kinds takes {', '.join(KINDS)}, comma-separated (got {args.kinds!r})")
    use_one_blas_thread()  # as a searching process does
    copy = args.workdir / "index"
    table = copied_table(args.index, copy)
    rows = table.count_rows()
    data = table.search().select(["vector"]).with_row_id(True).limit(None).to_arrow()
    matrix = data.column("vector").combine_chunks().flatten().to_numpy().reshape(rows, -1)
    row_ids = data.column("_rowid").to_numpy()
    embedder = OnnxEmbedder.load()
    texts = (read_queries(args.queries_from, args.queries) if args.queries_from
             else make_queries(args.queries, int(time.time())))
    queries = np.stack([embedder.embed_query(q) for q in texts])
    settings = [(vector_index.NPROBES, vector_index.REFINE_FACTOR)]
    if args.sweep:
        settings += [(n, r) for n in (5, 10, 20, 40) for r in (None, 2, 5)
                     if (n, r) != settings[0]]
    by_kind = []
    for kind in kinds:
        log(f"{rows} chunks; building an index of kind {kind}")
        build_seconds = build(table, kind, rows)
        runs = []
        for nprobes, refine in settings:
            log(f"{kind}: nprobes {nprobes}, refine_factor {refine}")
            runs.append(measure(table, matrix, row_ids, queries, nprobes, refine))
        by_kind.append({"kind": kind, "build_seconds": round(build_seconds, 1),
                        "index_mb": ann_index_mb(table), "runs": runs,
                        "store_query": cache_after_queries(copy, queries)})
    paths = sorted(set(table.search().select(["path"]).limit(None).to_arrow()
                       .column("path").to_pylist()))
    filters = {"20 files": in_list("path", paths[:20]), "language markdown":
               "language = 'markdown'", f"{len(paths) * 7 // 10} files":
               in_list("path", paths[:len(paths) * 7 // 10])}
    filtered = []
    for name, where in filters.items():
        log(f"filter: {name}")
        filtered.append({"filter": name, **filtered_search(table, queries[:60], where)})
    exact_ms = []
    for query in queries:
        started = time.perf_counter()
        exact_top(matrix, row_ids, query, MIN_CANDIDATES)
        exact_ms.append((time.perf_counter() - started) * 1000)
    result = {"chunks": rows, "queries": len(queries), "kinds": by_kind,
              "exact_matrix_p50_ms": round(float(np.percentile(exact_ms, 50)), 1),
              "exact_matrix_p95_ms": round(float(np.percentile(exact_ms, 95)), 1),
              "filtered": filtered}
    if args.segments:
        log(f"{args.segments} edits, each leaving a segment")
        result["segments"] = segment_growth(table, queries[:100], args.segments, kinds[-1])

    def table_out(r: dict) -> None:
        print(f"{r['chunks']} chunks, {r['queries']} queries; exact search in memory p50 "
              f"{r['exact_matrix_p50_ms']} / p95 {r['exact_matrix_p95_ms']} ms")
        print(f"{'kind':>5}{'nprobes':>8}{'refine':>8}{'recall@10':>11}{'recall@70':>11}"
              f"{'p50 ms':>8}{'p95 ms':>8}{'max |cos err|':>15}")
        for kind in r["kinds"]:
            for run in kind["runs"]:
                print(f"{kind['kind']:>5}{run['nprobes']:>8}{run['refine_factor'] or '-':>8}"
                      f"{run['recall_at_10']:>11}{run['recall_at_70']:>11}{run['p50_ms']:>8}"
                      f"{run['p95_ms']:>8}{run['max_cosine_error']:>15}")
        print(f"\n{'kind':>5}{'built s':>9}{'index MB':>10}{'store query p50 / p95 ms':>27}"
              f"{'cache after, MB':>17}")
        for kind in r["kinds"]:
            query = kind["store_query"]
            print(f"{kind['kind']:>5}{kind['build_seconds']:>9}{kind['index_mb']:>10}"
                  f"{query['p50_ms']:>14} / {query['p95_ms']:<10}{query['cache_mb']:>17}")

        print(f"\nfiltered, 60 queries: {'recall@70':>10}{'p50 ms':>8}{'p95 ms':>8}"
              f"{'scan p50':>10}{'scan p95':>10}")
        for run in r["filtered"]:
            print(f"{run['filter']:>22}{run['recall_at_70']:>10}{run['p50_ms']:>8}"
                  f"{run['p95_ms']:>8}{run['scan_p50_ms']:>10}{run['scan_p95_ms']:>10}")

        if r.get("segments"):
            print(f"\nthe store's vector query as edits pile up segments: "
                  f"{'segments':>9}{'p50 ms':>8}{'p95 ms':>8}")
            for run in r["segments"]:
                note = (f"  trained again in {run['build_seconds']} s"
                        if run.get("trained_again") else "")
                print(f"{'':>49}{run['segments']:>9}{run['p50_ms']:>8}{run['p95_ms']:>8}{note}")

    emit(result, args, table_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
