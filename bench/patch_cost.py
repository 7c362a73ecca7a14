"""What the in-memory copy's patch costs after a write of one file: the rows appended and the
replaced ones masked out (one compact copy once a quarter of the rows are masked out), against
a compact copy at every patch (the code before), in the same process, on the same table.

Builds a chunks table of N synthetic rows (random vectors, ~40 words of terms a row drawn from
a few thousand, ~400 bytes of text) in files of ``--chunks-per-file`` chunks, loads the copy a
search uses, then runs two chains of one-file patches side by side, step by step (each patch
from the matrix the one before gave, as an indexing run does): the same files, the same rows
read back from LanceDB for both. Prints the in-memory part of a patch (the read from LanceDB is
the same for both and printed apart), the RSS a patch adds while the copy before it is still
held, and whether both chains end answering the same searches.

    .venv/bin/python bench/patch_cost.py                        # 12k rows, 200 patches
    .venv/bin/python bench/patch_cost.py --rows 24000 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_lsp.memory import set_up_process  # noqa: E402

# As the rag-lsp command sets them up, so that RSS shows what a patch allocates.
set_up_process()

from rag_lsp.store.lance_store import (  # noqa: E402
    ROW_COLUMNS,
    TEXT_IN_MEMORY_BYTES,
    VECTOR_LOAD_BATCH_ROWS,
    ChunkStore,
    FileRecord,
)
from rag_lsp.store.sql import in_list  # noqa: E402
from rag_lsp.store.vector_cache import VectorMatrix  # noqa: E402

DIM = 384
RESULTS = Path(__file__).resolve().parent / "results"
WAYS = {"appended (now)": False, "compact copy each patch (before)": True}


def rows_for(path: str, count: int, salt: int, rng: np.random.Generator,
             words: np.ndarray) -> list[dict]:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = []
    for n in range(count):
        terms = " ".join(rng.choice(words, size=40))
        text = f"def step_{salt}_{n}(value):\n    " + terms[:380] + "\n"
        rows.append({
            "id": f"{path}#{salt}-{n}", "path": path, "start_line": n * 20 + 1,
            "end_line": n * 20 + 20, "language": "python", "kind": "function",
            "symbol": f"step_{salt}_{n}", "text": text, "search_text": text,
            "defines": f"step_{salt}_{n}", "terms": terms,
            "content_hash": f"{salt:032d}{n:032d}", "vector": vectors[n],
        })
    return rows


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def changed_rows(store: ChunkStore, path: str) -> list:
    """The file's rows as ``ChunkStore._patched`` reads them back."""
    return list(store._chunks.search().where(in_list("path", [path]))  # noqa: SLF001
                .select(["vector", *ROW_COLUMNS, "text"]).with_row_id(True).limit(None)
                .to_batches(VECTOR_LOAD_BATCH_ROWS))


def answers(matrix: VectorMatrix, queries: np.ndarray, words: list[str]) -> list:
    found = []
    for query in queries:
        positions, _ = matrix.nearest(query, 10)
        found.append(matrix.row_ids[positions].tolist())
    for word in words:
        positions, _ = matrix.terms.search([word], 10)
        found.append(matrix.row_ids[positions].tolist())
    return found


def figures(values: list[float]) -> dict:
    return {"p50": statistics.median(values), "mean": statistics.mean(values),
            "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=12_000, help="chunks in the table (12k)")
    parser.add_argument("--chunks-per-file", type=int, default=24)
    parser.add_argument("--patches", type=int, default=200, help="one-file patches a chain")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path, default=RESULTS / "patch_cost.json",
                        help="where the figures go too (bench/results/patch_cost.json)")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    words = np.array([f"w{n}" for n in range(4000)])
    files = max(2, args.rows // args.chunks_per_file)
    paths = [f"pkg/module_{f}.py" for f in range(files)]
    with tempfile.TemporaryDirectory(prefix="rag-patch-") as tmp:
        store = ChunkStore(Path(tmp) / "index", DIM, create=True)
        batch: list[FileRecord] = []
        batch_rows: list[dict] = []
        for f, path in enumerate(paths):
            batch.append(FileRecord(path, 100, 1, f"{f:064d}", args.chunks_per_file))
            batch_rows += rows_for(path, args.chunks_per_file, f, rng, words)
            if len(batch_rows) >= 4000 or f == files - 1:
                store.replace_files(batch, batch_rows)
                batch, batch_rows = [], []
        store.ensure_fts_index()
        store.optimize()
        loaded = store._load_vectors()  # noqa: SLF001
        assert loaded is not None and loaded.terms is not None, "no copy with postings"
        version = store.version()
        chains = dict.fromkeys(WAYS, loaded)
        spent: dict[str, list[float]] = {way: [] for way in WAYS}
        grown: dict[str, list[float]] = {way: [] for way in WAYS}
        reads: list[float] = []
        order = [paths[int(i)] for i in rng.integers(0, files, size=args.patches)]
        for step, path in enumerate(order):
            began = time.perf_counter()
            batches = changed_rows(store, path)
            reads.append((time.perf_counter() - began) * 1000)
            ways = list(WAYS) if step % 2 == 0 else list(WAYS)[::-1]
            for way in ways:
                before = rss_mb()
                began = time.perf_counter()
                patched = chains[way].patched(version, [path], batches, TEXT_IN_MEMORY_BYTES,
                                              compact=WAYS[way])
                spent[way].append((time.perf_counter() - began) * 1000)
                grown[way].append(rss_mb() - before)  # the matrix before is still held
                assert patched is not None
                chains[way] = patched
        queries = rng.standard_normal((20, DIM)).astype(np.float32)
        probe = [str(w) for w in words[:20]]
        same = len({json.dumps(answers(m, queries, probe)) for m in chains.values()}) == 1
        result = {
            "rows": len(loaded.row_ids), "patches": args.patches,
            "read_ms": figures(reads),
            "ways": {way: {"ms": figures(spent[way]), "rss_added_mb": figures(grown[way]),
                           "rows_held": len(chains[way].row_ids),
                           "live_rows": chains[way].live_rows} for way in WAYS},
            "same_answers": same,
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0 if same else 1
    print(f"{result['rows']} rows, {args.patches} one-file patches a chain; reading a file's "
          f"rows back from LanceDB: p50 {result['read_ms']['p50']:.1f} ms (both)")
    print(f"{'in memory':<34}{'p50 ms':>8}{'mean ms':>9}{'max ms':>8}"
          f"{'RSS added p50 / mean MB':>26}{'rows held':>11}")
    for way, fig in result["ways"].items():
        print(f"{way:<34}{fig['ms']['p50']:>8.1f}{fig['ms']['mean']:>9.1f}"
              f"{fig['ms']['max']:>8.1f}{fig['rss_added_mb']['p50']:>15.1f} / "
              f"{fig['rss_added_mb']['mean']:<9.1f}{fig['rows_held']:>11}")
    print(f"both chains answer the same searches: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
