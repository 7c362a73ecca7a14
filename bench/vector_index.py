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

    .venv/bin/python bench/vector_index.py --index /tmp/bench/lat100k/index/ws-*
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import lancedb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_latency import emit, log, make_queries  # noqa: E402

from rag_lsp.blas_threads import use_one_blas_thread  # noqa: E402
from rag_lsp.embedding.embedder import OnnxEmbedder  # noqa: E402
from rag_lsp.search.pipeline import MIN_CANDIDATES  # noqa: E402
from rag_lsp.store import vector_index  # noqa: E402
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


def segment_growth(table, queries: np.ndarray, edits: int) -> list[dict]:
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
    started = time.perf_counter()
    vector_index.build_vector_index(table, table.count_rows())
    growth.append({"segments": vector_index.index_segments(table), "trained_again": True,
                   "build_seconds": round(time.perf_counter() - started, 1),
                   **store_query_ms(table, queries)})
    return growth


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True, help="an index folder")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench/vector-index"),
                        help="where the table is copied (default: %(default)s)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sweep", action="store_true", help="other nprobes/refine values")
    parser.add_argument("--segments", type=int, default=0, metavar="N",
                        help="then N edits, each leaving a segment in the index (see above)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "vector_index.json")
    args = parser.parse_args()
    use_one_blas_thread()  # as a searching process does
    copy = args.workdir / "index"
    shutil.rmtree(copy, ignore_errors=True)
    log(f"copying {args.index / 'chunks.lance'}")
    shutil.copytree(args.index / "chunks.lance", copy / "chunks.lance")
    table = lancedb.connect(str(copy)).open_table("chunks")
    rows = table.count_rows()
    data = table.search().select(["vector"]).with_row_id(True).limit(None).to_arrow()
    matrix = data.column("vector").combine_chunks().flatten().to_numpy().reshape(rows, -1)
    row_ids = data.column("_rowid").to_numpy()
    embedder = OnnxEmbedder.load()
    queries = np.stack([embedder.embed_query(q)
                        for q in make_queries(args.queries, int(time.time()))])
    log(f"{rows} chunks; building the ANN index as the store does")
    started = time.perf_counter()
    vector_index.build_vector_index(table, rows)
    build_seconds = time.perf_counter() - started
    settings = [(vector_index.NPROBES, vector_index.REFINE_FACTOR)]
    if args.sweep:
        settings += [(n, r) for n in (5, 10, 20, 40) for r in (None, 2, 5)
                     if (n, r) != settings[0]]
    runs = []
    for nprobes, refine in settings:
        log(f"nprobes {nprobes}, refine_factor {refine}")
        runs.append(measure(table, matrix, row_ids, queries, nprobes, refine))
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
    result = {"chunks": rows, "queries": len(queries), "build_seconds": round(build_seconds, 1),
              "exact_matrix_p50_ms": round(float(np.percentile(exact_ms, 50)), 1),
              "exact_matrix_p95_ms": round(float(np.percentile(exact_ms, 95)), 1),
              "runs": runs, "filtered": filtered}
    if args.segments:
        log(f"{args.segments} edits, each leaving a segment")
        result["segments"] = segment_growth(table, queries[:100], args.segments)

    def table_out(r: dict) -> None:
        print(f"{r['chunks']} chunks, {r['queries']} queries; index built in "
              f"{r['build_seconds']} s; exact search in memory p50 {r['exact_matrix_p50_ms']}"
              f" / p95 {r['exact_matrix_p95_ms']} ms")
        print(f"{'nprobes':>8}{'refine':>8}{'recall@10':>11}{'recall@70':>11}{'p50 ms':>8}"
              f"{'p95 ms':>8}{'max |cos err|':>15}")
        for run in r["runs"]:
            print(f"{run['nprobes']:>8}{run['refine_factor'] or '-':>8}"
                  f"{run['recall_at_10']:>11}{run['recall_at_70']:>11}{run['p50_ms']:>8}"
                  f"{run['p95_ms']:>8}{run['max_cosine_error']:>15}")

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
