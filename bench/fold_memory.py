"""What one fold of a batch into LanceDB's indexes holds: the memory of ``table.optimize()``
on the chunks table after a batch of new rows, with every index of the table, and without
each index in turn.

Past 50k chunks an index run folds every batch into the indexes as it is written
(``ChunkStore.optimize``; ``rag_lsp.indexing.indexer.LARGE_INDEX_BATCH_CHUNKS``), in the
language server's own process, and at 100k chunks that step is the highest of a re-index in
process (bench/README.md, "What a fold of a batch holds at 100k chunks"). This bench
measures LanceDB's step alone, without the store around it: for each variant a fresh copy of
the index and a fresh process set up as the ``rag-lsp`` command sets itself up
(``rag_lsp.memory.set_up_process``), which drops the variant's indexes, then ``--rounds``
times appends ``--rows`` rows (copies of stored rows under new ids, as a batch of new chunks
lands) and runs ``optimize``, RSS sampled every 2 ms. Freed memory is handed back before each
round, so a round's ``RssAnon`` figure is what the fold itself holds above where it started.
The first round's ``VmRSS`` also counts LanceDB's code for compactions and index updates,
paged in by the first fold (file-backed memory); later rounds show the fold alone. Each round
also records the table's fragments and rows after its append and after its fold: a fold that
rewrote rows leaves fewer fragments.

    .venv/bin/python bench/fold_memory.py --workdir /tmp/bench/lat100k
    .venv/bin/python bench/fold_memory.py --index-dir DIR --rounds 5 --json

``--workdir`` is a ``server_latency.py`` workdir (the stand-in 100k-chunk one: ``--files 4250
--stand-in-vectors``); ``--index-dir`` any folder that holds a ``chunks.lance`` table with an
``id`` column. Both are copied, never changed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench_basics import emit, log  # this script's folder is on the import path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CHUNKS = "chunks"
SAMPLE_SECONDS = 0.002
ALL_FULL_TEXT = "the full-text indexes"


def status_kb() -> dict[str, int]:
    """This process's ``VmRSS``, ``RssAnon`` and ``RssFile``, kB (rounded to MB only when
    printed: the ANN index's part of a fold is a few MB)."""
    found = {}
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                found[key] = int(value.split()[0])
    return found


def peak_during(call: Callable[[], object]) -> tuple[dict[str, int], dict[str, int], float]:
    """(memory before, peak of each figure while ``call()`` ran, seconds)."""
    before = status_kb()
    peak, done = dict(before), threading.Event()

    def sample() -> None:
        while not done.is_set():
            for key, value in status_kb().items():
                peak[key] = max(peak[key], value)
            done.wait(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        call()
    finally:
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
    for key, value in status_kb().items():
        peak[key] = max(peak[key], value)
    return before, peak, seconds


def layout(table) -> dict[str, int]:  # noqa: ANN001 - a lancedb Table
    """The table's fragments, rows and version."""
    stats = table.stats()
    return {"fragments": stats["fragment_stats"]["num_fragments"],
            "rows": stats["num_rows"], "version": table.version}


def child(index_dir: Path, drop: list[str], rows: int, rounds: int) -> dict:
    """One variant, in this (fresh) process: drop ``drop``, then fold ``rounds`` batches."""
    sys.path.insert(0, str(HERE.parent))
    from rag_lsp import memory

    memory.set_up_process()  # before LanceDB and pyarrow load, as `rag-lsp` does
    import lancedb
    import pyarrow as pa

    from rag_lsp.store.lance_store import _KEEP_OLD_VERSIONS  # what the store's fold keeps

    table = lancedb.connect(index_dir).open_table(CHUNKS)
    for name in drop:
        table.drop_index(name)
    stored = table.search().limit(rows * rounds).to_arrow()
    id_column = stored.schema.get_field_index("id")
    out = {"indexes": sorted(i.name for i in table.list_indices()),
           "rows": table.count_rows(), "arrow_pool": pa.default_memory_pool().backend_name,
           "rounds": []}
    for n in range(rounds):
        batch = stored.slice(n * rows, rows)
        batch = batch.set_column(id_column, "id",
                                 pa.array([f"fold-probe-{n}-{i}" for i in range(rows)]))
        table.add(batch)
        appended = layout(table)
        memory.return_freed_memory()
        before, peak, seconds = peak_during(
            lambda: table.optimize(cleanup_older_than=_KEEP_OLD_VERSIONS))
        memory.return_freed_memory()
        out["rounds"].append({"seconds": round(seconds, 2), "before_kb": before,
                              "peak_kb": peak, "after_kb": status_kb(),
                              "appended": appended, "folded": layout(table)})
    return out


def variants(table) -> dict[str, list[str]]:  # noqa: ANN001 - a lancedb Table
    """Variant name -> indexes it drops: none, each index alone, and every full-text one."""
    indices = table.list_indices()
    names = {"every index": []}
    names.update({f"without {i.name}": [i.name] for i in indices})
    full_text = [i.name for i in indices if i.index_type == "FTS"]
    if len(full_text) > 1:
        names[f"without {ALL_FULL_TEXT}"] = full_text
    return names


def index_dir_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Path:
    if args.index_dir is not None:
        found = args.index_dir
    else:
        tables = sorted(args.workdir.glob(f"index/*/{CHUNKS}.lance"))
        if len(tables) != 1:
            parser.error(f"{args.workdir} should hold one index (index/*/{CHUNKS}.lance), "
                         f"found {len(tables)}: make one with bench/server_latency.py "
                         "--workdir DIR, or name it with --index-dir")
        found = tables[0].parent
    if not (found / f"{CHUNKS}.lance").is_dir():
        hint = (" (name the folder that holds it)" if found.name == f"{CHUNKS}.lance" else "")
        parser.error(f"{found} holds no {CHUNKS}.lance table{hint}")
    return found


def table_problem(table, rows: int, rounds: int) -> str | None:  # noqa: ANN001
    """What keeps ``table`` from giving ``rounds`` batches of ``rows`` new rows, or None."""
    if "id" not in table.schema.names:
        return f"the {CHUNKS} table has no id column: it is not a rag-lsp index"
    stored = table.count_rows()
    if stored < rows * rounds:
        return (f"the {CHUNKS} table holds {stored} rows, fewer than --rows x --rounds "
                f"({rows * rounds}): lower --rows or --rounds")
    return None


def run(index_dir: Path, rows: int, rounds: int, parser: argparse.ArgumentParser) -> dict:
    import lancedb  # only in the parent, which measures nothing itself

    table = lancedb.connect(index_dir).open_table(CHUNKS)
    problem = table_problem(table, rows, rounds)
    if problem:
        parser.error(problem)
    result: dict = {"index_dir": str(index_dir), "rows_a_batch": rows, "variants": {}}
    chosen = variants(table)
    if chosen == {"every index": []}:
        print("the table has no index: only the fold of the data itself is measured",
              file=sys.stderr)
    for name, drop in chosen.items():
        with tempfile.TemporaryDirectory(prefix="fold-memory-") as tmp:
            copy = Path(tmp) / "index"
            shutil.copytree(index_dir, copy, symlinks=True)
            log(name)
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(copy), "--rows", str(rows),
                 "--rounds", str(rounds), *(["--drop", *drop] if drop else [])],
                capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{name}: the child failed:\n{done.stderr[-2000:]}")
            result["variants"][name] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def print_table(result: dict) -> None:
    print(f"{result['index_dir']}: optimize after {result['rows_a_batch']} new rows, "
          "MB above the start of each round (RssAnon / VmRSS), seconds")
    print(f"{'variant':<36}{'rows':>8}  rounds (fragments after the append -> after the fold)")
    for name, variant in result["variants"].items():
        rounds = "  ".join(
            f"+{mb(r['peak_kb']['RssAnon'] - r['before_kb']['RssAnon'])}"
            f"/+{mb(r['peak_kb']['VmRSS'] - r['before_kb']['VmRSS'])} {r['seconds']:.2f}s"
            f" ({r['appended']['fragments']}->{r['folded']['fragments']})"
            for r in variant["rounds"])
        print(f"{name:<36}{variant['rows']:>8}  {rounds}")


def mb(kb: int) -> int:
    return round(kb / 1024)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--workdir", type=Path,
                       help="a server_latency.py workdir (its one index is copied)")
    where.add_argument("--index-dir", type=Path,
                       help="a folder holding a chunks.lance table (copied)")
    where.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=512,
                        help="new rows a round appends before it folds (512: an index "
                             "run's batch below 50k chunks, 2,048 past it; the fold holds "
                             "as much either way)")
    parser.add_argument("--rounds", type=int, default=3, help="folds a variant (3)")
    parser.add_argument("--drop", nargs="*", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path, default=RESULTS / "fold_memory.json",
                        help="where the JSON results go (bench/results/fold_memory.json)")
    args = parser.parse_args()
    if args.rows < 1 or args.rounds < 1:
        parser.error("--rows and --rounds must be at least 1")
    if args.child is not None:
        print(json.dumps(child(args.child, args.drop, args.rows, args.rounds)))
        return 0
    emit(run(index_dir_of(args, parser), args.rows, args.rounds, parser), args, print_table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
