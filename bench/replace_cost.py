"""What one per-file update costs: ``ChunkStore.replace_files`` (since 2026-11-28: an upsert of
the file's rows by id, LanceDB's fast path, then a delete of its rows no longer there, two
commits behind a marker that keeps readers on the version before, see
``rag_lsp.store.replacing``) against the one ``merge_insert`` commit it superseded, which also
deleted them (``when_not_matched_by_source_delete``) and whose join reads the whole table.
Same table, same run: milliseconds and the RSS the call adds.

Builds a chunks table of N synthetic rows (random vectors, ~0.5 KB of distinct text a chunk)
spread over files of ``--chunks-per-file`` chunks, then alternates the two ways of replacing
one file's chunks (a small edit: same count, half the chunks new), timing each and sampling
this process's RSS every 2 ms while it runs. The process's allocators are set up as the
server's (glibc arenas capped, large buffers mapped, Arrow on glibc), so memory a call frees
goes back and the next call starts from the same floor. Both write to the one table, whose
uncompacted versions accumulate as they do between a server's compactions. Until 2026-11-27
the bench compared the three-commit replace (delete, add, file record) that the one
``merge_insert`` had superseded; on 2026-11-27 it compared that ``merge_insert`` (then
``replace_files``) with the two commits without the marker.

    .venv/bin/python bench/replace_cost.py                      # 11k rows, 40 rounds
    .venv/bin/python bench/replace_cost.py --rows 100000 --rounds 20 --json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from index_workspace import RssSampler

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_lsp import memory  # noqa: E402

memory.set_up_process()  # as `rag-lsp` does, before any library starts a thread

import pyarrow as pa  # noqa: E402

from rag_lsp.store.lance_store import ChunkStore, FileRecord  # noqa: E402
from rag_lsp.store.sql import in_list  # noqa: E402

DIM = 384
RESULTS = Path(__file__).resolve().parent / "results"


def rows_for(path: str, count: int, salt: int, rng: np.random.Generator) -> list[dict]:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    rows = []
    for n in range(count):
        body = "".join(f"    value = value * {n + k} + {salt} - {k}  # step {k} of {salt}\n"
                       for k in range(8))
        text = f"def step_{salt}_{n}(value):\n{body}    return value\n"
        rows.append({
            "id": f"{path}#L{n * 3 + 1}-{salt:06d}{n:06d}", "path": path,
            "start_line": n * 3 + 1, "end_line": n * 3 + 3, "language": "python",
            "kind": "function", "symbol": f"step_{salt}_{n}", "text": text,
            "search_text": text, "defines": f"step_{salt}_{n}", "terms": "step value",
            "content_hash": f"{salt:032d}{n:032d}", "vector": vectors[n],
        })
    return rows


def one_merge(store: ChunkStore, record: FileRecord, rows: list[dict]) -> None:
    """The superseded way (until 2026-11-28): one merge_insert that also deletes the file's rows
    no longer there (its join reads the whole table), then the file record."""
    chunks = store._chunks  # noqa: SLF001 - the baseline needs the raw table
    (
        chunks.merge_insert("id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete(in_list("path", [record.path]))
        .execute(pa.Table.from_pylist(rows, schema=chunks.schema))
    )
    store.touch_files([record])


def measured(call: Callable[[], None], rss: RssSampler) -> tuple[float, float]:
    """(milliseconds, MB of RSS added at the peak) of ``call``."""
    rss.reset()
    floor = rss.peak_kb
    began = time.perf_counter()
    call()
    elapsed = (time.perf_counter() - began) * 1000
    after = rss.current_kb()  # a call shorter than one interval may have had no sample
    return elapsed, (max(rss.peak_kb, after) - floor) / 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=11_000)
    parser.add_argument("--chunks-per-file", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
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
        log = sys.stderr if args.json else sys.stdout
        print(f"table: {store.count_chunks()} rows in {files} files "
              f"(built in {time.perf_counter() - started:.1f} s)", file=log)
        ways: dict[str, Callable[[FileRecord, list[dict]], None]] = {
            "replace_files (2 commits)": lambda record, rows: store.replace_files([record], rows),
            "one merge_insert (before)": lambda record, rows: one_merge(store, record, rows)}
        rss = RssSampler(interval=0.002)
        ms: dict[str, list[float]] = {name: [] for name in ways}
        mb: dict[str, list[float]] = {name: [] for name in ways}
        for round_ in range(args.rounds):
            names = list(ways) if round_ % 2 == 0 else list(reversed(ways))  # neither always first
            for n, name in enumerate(names):
                path = f"pkg/module_{rng.integers(files)}.py"
                salt = 10_000_000 + round_ * 2 + n
                record = FileRecord(path, 100, 2 + round_, f"{salt:064d}",
                                    args.chunks_per_file)
                # half the chunks edited (new ids), half as they were (same ids)
                kept = sorted(store._chunks.search().where(in_list("path", [path]))  # noqa: SLF001
                              .limit(None).to_list(), key=lambda row: row["start_line"])
                new = rows_for(path, args.chunks_per_file, salt, rng)
                rows = [kept[i] if i % 2 and i < len(kept) else row for i, row in enumerate(new)]
                took, added = measured(functools.partial(ways[name], record, rows), rss)
                ms[name].append(took)
                mb[name].append(added)
        ids = store.chunk_rows("true", ["id"])
        duplicates = len(ids) - len({r["id"] for r in ids})
        result = {"rows": len(ids), "files": files, "duplicate_ids": duplicates,
                  "rounds": args.rounds,
                  "ways": {name: {"ms_p50": round(statistics.median(ms[name]), 1),
                                  "ms_p95": round(pct(ms[name], 0.95), 1),
                                  "rss_added_mb_p50": round(statistics.median(mb[name]), 1),
                                  "rss_added_mb_max": round(max(mb[name]), 1)}
                           for name in ways}}
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "replace_cost.json").write_text(json.dumps(result, indent=2) + "\n")
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(f"{'one file replaced':<28}{'median ms':>10}{'p95 ms':>9}"
                  f"{'RSS added MB: median':>22}{'max':>6}")
            for name, figures in result["ways"].items():
                print(f"{name:<28}{figures['ms_p50']:>10.1f}{figures['ms_p95']:>9.1f}"
                      f"{figures['rss_added_mb_p50']:>22.1f}{figures['rss_added_mb_max']:>6.1f}")
            print(f"rows {len(ids)}, duplicate ids {duplicates}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
