"""What searches pay for writes a compaction waits for: search latency on an index whose last
writes are left as they landed (each in a fragment of its own, the rows they replaced masked,
their new rows outside the full-text and ANN indexes), beside the same index compacted.

A compaction rewrites the whole chunks table, so ``ChunkStore.needs_optimize`` lets writes
wait until one is due (too many fragments, rows outside the full-text index, masked rows or
old versions). This copies ``server_memory.py``'s synthetic index three times and makes the
same writes in them (each replaces the chunks of ``--files-per-write`` files, 20 chunks a
file, with edited ones, as an edit does) until one makes a compaction due: ``waiting`` has
the writes before that one (the most that wait), ``due`` that one too (what a server
compacts at once), ``compacted`` the waiting ones compacted. It times LanceDB's own
full-text query on the three in this process (what a search runs past 50k chunks, and
before the in-memory postings load), then ``Workspace.search`` in fresh processes on the
three in turn (``engine_latency.py``'s measurement: warm-up, the in-memory copies loaded,
then new queries back to back).

    .venv/bin/python bench/uncompacted_cost.py --chunks 10000 --rounds 2
    .venv/bin/python bench/uncompacted_cost.py --chunks 100000 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from engine_latency import figures, measure  # this script's folder is on the import path
from server_latency import pct
from server_memory import ensure_index

HERE = Path(__file__).resolve().parent
CODE = HERE.parent
# waiting: the most writes the rule lets wait; due: one write more, the one that makes a
# compaction due (what a server would compact at once); compacted: the waiting ones compacted.
COPIES = ("waiting", "due", "compacted")


def fragments(store) -> int:
    return store._chunks.stats()["fragment_stats"]["num_fragments"]  # noqa: SLF001


def edit_files(store, paths: list[str], mark: int) -> None:
    """One write that replaces the chunks of ``paths`` with edited ones."""
    from rag_lsp.store.lance_store import FileRecord
    from rag_lsp.store.sql import in_list

    records = store.file_records()
    columns = list(store._chunks.schema.names)  # noqa: SLF001
    rows = store.chunk_rows(in_list("path", paths), columns)
    for row in rows:
        row["text"] += f"\n# edited {mark}"
        row["search_text"] += f" edited {mark}"
        row["content_hash"] = f"{row['content_hash'][:56]}{mark:08d}"
        row["id"] = f"{row['id']}:{mark}"
    changed = [FileRecord(p, records[p].size + 1, records[p].mtime_ns + 1,
                          f"{records[p].sha256[:56]}{mark:08d}", records[p].chunks)
               for p in paths]
    store.replace_files(changed, rows)


def copies_of(index_dir: Path, workdir: Path) -> dict[str, Path]:
    return {name: workdir / f"{index_dir.name}-{name}" for name in COPIES}


def prepare(index_dir: Path, workdir: Path, files_per_write: int) -> dict[str, Path]:
    """The three copies, made once (see the module's docstring)."""
    from rag_lsp.store.lance_store import MAX_FRAGMENTS, ChunkStore
    from rag_lsp.store.manifest import IndexManifest

    copies = copies_of(index_dir, workdir)
    if all((path / "manifest.json").exists() for path in copies.values()):
        return copies
    dim = IndexManifest.read(index_dir).dimension
    stores = {}
    for name, path in copies.items():
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(index_dir, path)
        stores[name] = ChunkStore(path, dim)
    paths = sorted(stores["waiting"].file_records())
    spread = paths[::max(1, len(paths) // (4 * MAX_FRAGMENTS * files_per_write))]
    writes = [spread[n * files_per_write:(n + 1) * files_per_write]
              for n in range(len(spread) // files_per_write)]
    made = 0
    for chosen in writes:  # the one that makes a compaction due goes to "due" alone
        edit_files(stores["due"], chosen, made)
        made += 1
        if stores["due"].needs_optimize():
            break
        edit_files(stores["waiting"], chosen, made - 1)
        edit_files(stores["compacted"], chosen, made - 1)
    else:
        raise SystemExit("no compaction came due: use more --files-per-write")
    stores["compacted"].optimize()
    for name, store in stores.items():
        print(f"{name}: {made - (name != 'due')} writes of {files_per_write} files, "
              f"{fragments(store)} fragments, {store._unindexed_rows()} rows outside the "  # noqa: SLF001
              f"full-text index, due: {store.needs_optimize()}", flush=True)
    return copies


def lexical_lookups(copies: dict[str, Path], queries: int) -> dict[str, dict]:
    """LanceDB's own full-text query on each copy, in turn, in this process: what a search
    runs before the in-memory postings load, and every search past 50k chunks."""
    from server_latency import make_queries

    from rag_lsp.store.lance_queries import text_rows
    from rag_lsp.store.lance_store import RESULT_COLUMNS, ChunkStore
    from rag_lsp.store.manifest import IndexManifest

    tables = {name: ChunkStore(path, IndexManifest.read(path).dimension)._chunks  # noqa: SLF001
              for name, path in copies.items()}
    took: dict[str, list[float]] = {name: [] for name in copies}
    for n, query in enumerate(make_queries(queries + 10, 7)):
        for name, table in tables.items():
            started = time.perf_counter()
            text_rows(table, query, column="search_text", columns=[*RESULT_COLUMNS, "_score"],
                      limit=50, where=None)
            if n >= 10:  # warm-up
                took[name].append((time.perf_counter() - started) * 1000)
    return {name: {"p50": round(statistics.median(t), 1), "p95": round(pct(t, 0.95), 1)}
            for name, t in took.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000,
                        help="size of server_memory.py's synthetic index (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench/memory"),
                        help="where it and the copies are kept (default: %(default)s)")
    parser.add_argument("--files-per-write", type=int, default=1,
                        help="files each write replaces, 20 chunks each (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="processes per copy (0: only make the copies)")
    parser.add_argument("--queries", type=int, default=150, help="timed searches a process")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    index_dir, root = ensure_index(args.workdir, args.chunks)
    copies = prepare(index_dir, args.workdir, args.files_per_write)
    if args.rounds < 1:
        return 0
    lookups = lexical_lookups(copies, args.queries)
    print(f"\nLanceDB's full-text query alone ({args.queries} queries, in turn), ms:")
    for name, f in lookups.items():
        print(f"  {name:<10} p50 {f['p50']:6.1f}  p95 {f['p95']:6.1f}")
    runs: dict[str, list[list[float]]] = {name: [] for name in copies}
    for round_ in range(args.rounds):
        for name in (copies if round_ % 2 == 0 else reversed(list(copies))):
            runs[name].append(measure(CODE, copies[name], root, args.queries, 100 + round_))
            print(f"[{time.strftime('%H:%M:%S')}] {name}, round {round_ + 1}: "
                  f"p95 {pct(runs[name][-1], 0.95):.1f} ms", file=sys.stderr, flush=True)
    results = {name: figures(r) for name, r in runs.items()}
    print(f"\n{args.chunks:,} chunks: Workspace.search ms, {args.rounds} processes x "
          f"{args.queries} searches each")
    for name, f in results.items():
        print(f"  {name:<10} p50 {f['p50']:6.1f}  p95 {f['p95']:6.1f}  p99 {f['p99']:6.1f}"
              f"   p95 per process {f['p95_per_run']}")
    results = {"search": results, "full_text_query": lookups}
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
