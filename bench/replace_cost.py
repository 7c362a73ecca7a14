"""What one atomic per-file update costs: ``ChunkStore.replace_files`` (one ``merge_insert``
commit that deletes the file's old chunks and adds the new ones) against the three-commit
replace it superseded (delete, add, then the file record), on the same table in the same run.

Builds a chunks table of N synthetic rows (random vectors, distinct text) spread over files of
``--chunks-per-file`` chunks, then alternates the two ways of replacing one file's chunks
(a small edit: same count, new content), timing each. Uncompacted versions accumulate the same
way for both, as they do between a server's compactions.

    .venv/bin/python bench/replace_cost.py                      # 11k rows, 40 rounds
    .venv/bin/python bench/replace_cost.py --rows 100000 --rounds 30
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_lsp.store.lance_store import ChunkStore, FileRecord  # noqa: E402
from rag_lsp.store.sql import in_list  # noqa: E402

DIM = 384


def rows_for(path: str, count: int, salt: int, rng: np.random.Generator) -> list[dict]:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    rows = []
    for n in range(count):
        text = f"def step_{salt}_{n}(value):\n    return value * {n} + {salt}\n"
        rows.append({
            "id": f"{path}#L{n * 3 + 1}-{salt:06d}{n:06d}", "path": path,
            "start_line": n * 3 + 1, "end_line": n * 3 + 3, "language": "python",
            "kind": "function", "symbol": f"step_{salt}_{n}", "text": text,
            "search_text": text, "defines": f"step_{salt}_{n}", "terms": "step value",
            "content_hash": f"{salt:032d}{n:032d}", "vector": vectors[n],
        })
    return rows


def old_replace(store: ChunkStore, record: FileRecord, rows: list[dict]) -> None:
    """The superseded way: delete, add, upsert the record (three commits)."""
    chunks = store._chunks  # noqa: SLF001 - the baseline needs the raw table
    chunks.delete(in_list("path", [record.path]))
    chunks.add(pa.Table.from_pylist(rows, schema=chunks.schema))
    store.touch_files([record])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=11_000)
    parser.add_argument("--chunks-per-file", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    files = max(2, args.rows // args.chunks_per_file)
    with tempfile.TemporaryDirectory(prefix="rag-replace-") as tmp:
        store = ChunkStore(Path(tmp) / "index", DIM, create=True)
        started = time.perf_counter()
        batch: list[FileRecord] = []
        batch_rows: list[dict] = []
        for f in range(files):
            path = f"pkg/module_{f}.py"
            batch.append(FileRecord(path, 100, 1, f"{f:064d}", args.chunks_per_file))
            batch_rows += rows_for(path, args.chunks_per_file, f, rng)
            if len(batch_rows) >= 5000 or f == files - 1:
                store.replace_files(batch, batch_rows)
                batch, batch_rows = [], []
        store.ensure_fts_index()
        store.optimize()
        print(f"table: {store.count_chunks()} rows in {files} files "
              f"(built in {time.perf_counter() - started:.1f} s)")
        timings: dict[str, list[float]] = {"replace_files (1 commit)": [],
                                           "delete+add (3 commits)": []}
        for round_ in range(args.rounds):
            for name in timings:
                path = f"pkg/module_{rng.integers(files)}.py"
                salt = 10_000_000 + round_ * 2 + (name.startswith("delete"))
                record = FileRecord(path, 100, 2 + round_, f"{salt:064d}",
                                    args.chunks_per_file)
                rows = rows_for(path, args.chunks_per_file, salt, rng)
                began = time.perf_counter()
                if name.startswith("replace"):
                    store.replace_files([record], rows)
                else:
                    old_replace(store, record, rows)
                timings[name].append((time.perf_counter() - began) * 1000)
        print(f"{'one file replaced':<26}{'median ms':>10}{'p95 ms':>10}")
        for name, values in timings.items():
            print(f"{name:<26}{statistics.median(values):>10.1f}{pct(values, 0.95):>10.1f}")
        ids = store.chunk_rows("true", ["id"])
        duplicates = len(ids) - len({r["id"] for r in ids})
        print(f"rows {len(ids)}, duplicate ids {duplicates}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
