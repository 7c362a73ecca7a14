"""What reading a search's rows from LanceDB with the packed fields saves
(``rag_lsp/store/packed_fields.py``), search by search, against reading each column.

Past 50k chunks (no in-memory copy) every search reads its candidates' columns back from
LanceDB: the nearest rows, the full-text and the defined-name matches. A copy of a
``server_latency.py`` workdir is opened in this process, set up as the ``rag-lsp`` command
sets itself up; an index written before the packed column gets it as an index run would give
it (``ChunkStore.ensure_packed_column``: its seconds and the bytes it adds are reported).
``Workspace.search`` (real query model) is then timed reading the packed column and reading
the columns, query by query, the order swapped each query (the second search of a query
takes its cached vector, so each way gets the model's call half the time); both must give
the same results. Wall time and the process's CPU time (LanceDB's threads included) are
reported, and the search's parts (``timings``). Each way counts the rows it read from the
packed column: none for the columns, some for the packed column, else it exits 1. With
``--no-memory-copy`` a small workdir is read as a large one (its ANN index trained in the
copy).

    .venv/bin/python bench/packed_fields.py --workdir /tmp/bench/lat100k
    .venv/bin/python bench/packed_fields.py --workdir /tmp/bench/lat12k --no-memory-copy --json
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

# Nothing heavy before the process is set up as the command (see bench_basics)
from bench_basics import (  # this script's folder is on the path
    emit,
    folder_bytes,
    log,
    pct,
    workdir_problem,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PARTS = ("search", "cpu", "vectorMs", "lexicalMs")
WAYS = ("columns", "packed")


def figures(values: list[float]) -> dict:
    return {"p50": round(pct(values, 0.5), 2), "p95": round(pct(values, 0.95), 2)}


def counting_packed_rows() -> list[int]:
    """The rows searches read from the packed column from here on (a counter, in a list)."""
    from rag_lsp.store import lance_store

    count = [0]
    unpack = lance_store.unpack

    def counted(rows: list[dict]) -> list[dict]:
        count[0] += len(rows)
        return unpack(rows)

    lance_store.unpack = counted
    return count


def compare(ws, store, queries: list[str], counter: list[int]  # noqa: ANN001
            ) -> tuple[dict, int, dict]:
    """Each query searched each way in turn, the order swapped each query: each way's times,
    the number of queries whose results differ between the two, and the rows each way read
    from the packed column by ``counter`` (none for the columns, else the bench measures
    nothing)."""
    from rag_lsp.store.lance_store import RESULT_COLUMNS

    packed_way = store._reading_rows  # noqa: SLF001 - the reads' columns, as the store picks

    def columns_way():  # noqa: ANN202
        return store._reading(), RESULT_COLUMNS  # noqa: SLF001

    ways = {"columns": columns_way, "packed": packed_way}
    times = {way: {part: [] for part in PARTS} for way in ways}
    packed_rows = dict.fromkeys(ways, 0)
    differ = 0
    for n, query in enumerate(queries):
        answers = set()
        for way in WAYS if n % 2 else WAYS[::-1]:
            store._reading_rows = ways[way]  # noqa: SLF001
            counted = counter[0]
            began, cpu = time.perf_counter(), time.process_time()
            response = ws.search(query)
            times[way]["search"].append((time.perf_counter() - began) * 1000)
            times[way]["cpu"].append((time.process_time() - cpu) * 1000)
            packed_rows[way] += counter[0] - counted
            wire = response.timings.to_wire()
            for part in PARTS[2:]:
                times[way][part].append(wire.get(part, 0.0))
            answers.add(tuple(repr(r.to_dict()) for r in response.results))  # every field
        differ += len(answers) > 1
    store._reading_rows = packed_way  # noqa: SLF001
    return times, differ, packed_rows


def run(args: argparse.Namespace) -> dict:
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)
    import server_latency
    from copy_load import PeakRss, rss_mb

    from rag_lsp.store import vector_index
    from rag_lsp.store.packed_fields import PACKED_COLUMN

    if args.no_memory_copy:  # a small workdir read as a large one is (with its ANN index)
        vector_index.MATRIX_MAX_ROWS = 0
    out: dict = {"rounds": []}
    with tempfile.TemporaryDirectory(prefix="rag-packed-") as tmp:
        work = Path(tmp) / "work"
        shutil.copytree(args.workdir, work, symlinks=True)
        ws = server_latency.open_copied_workdir(work)
        ws.search("open the index")
        store = ws._index.store()  # noqa: SLF001 - what the searches read
        out["chunks"] = store.count_chunks()
        if args.no_memory_copy and not store.large():
            store.optimize()  # trains the ANN index the lowered size calls for
        if not store.large():
            raise SystemExit(f"{args.workdir}: {out['chunks']} chunks, answered from the "
                             "in-memory copy: nothing read from LanceDB to measure (give "
                             "--no-memory-copy, or a workdir past 50k chunks)")
        chunks_dir = store.index_dir / "chunks.lance"
        if PACKED_COLUMN not in store._chunks.schema.names:  # noqa: SLF001
            before, rss = folder_bytes(chunks_dir), rss_mb()
            began = time.perf_counter()
            with PeakRss() as peak:
                added = store.ensure_packed_column()
            out["column_added"] = {"seconds": round(time.perf_counter() - began, 3),
                                   "bytes_before": before,
                                   "bytes_added": folder_bytes(chunks_dir) - before,
                                   "rss_before_mb": round(rss, 1),
                                   "rss_peak_above_mb": round(peak.peak - rss, 1)}
            if not added:
                raise SystemExit("the packed column could not be added (see the log above)")
            log(f"the packed column added in {out['column_added']['seconds']} s, "
                f"+{out['column_added']['bytes_added'] / 2**20:.1f} MB on disk, RSS peak "
                f"+{out['column_added']['rss_peak_above_mb']} MB")
        for query in server_latency.make_queries(40, 99):  # the caches and the model warm
            ws.search(query)
        counter = counting_packed_rows()
        for round_ in range(args.rounds):
            times, differ, packed_rows = compare(
                ws, store, server_latency.make_queries(args.queries, 20 + round_), counter)
            out["rounds"].append({
                "queries": args.queries, "answers_differ": differ,
                "rows_read_packed": packed_rows,
                "searches": {way: {part: figures(v) for part, v in parts.items()}
                             for way, parts in times.items()}})
            log(f"round {round_ + 1}: answers differ for {differ} queries")
    out["same_answers"] = all(r["answers_differ"] == 0 for r in out["rounds"])
    out["each_way_as_named"] = all(
        r["rows_read_packed"]["columns"] == 0 < r["rows_read_packed"]["packed"]
        for r in out["rounds"])
    return out


def print_table(r: dict) -> None:
    added = r.get("column_added")
    print(f"{r['chunks']} chunks; " + (
        f"the packed column added in {added['seconds']} s, +{added['bytes_added'] / 2**20:.1f} "
        f"MB on {added['bytes_before'] / 2**20:.0f} MB, RSS peak +{added['rss_peak_above_mb']} "
        f"MB on {added['rss_before_mb']:.0f}" if added
        else "the index had the packed column"))
    for n, rnd in enumerate(r["rounds"], 1):
        print(f"round {n}, {rnd['queries']} queries, rows read from the packed column "
              f"{rnd['rows_read_packed']['packed']}; p50 / p95 ms")
        print(f"  {'':10}" + "".join(f"{p.removesuffix('Ms'):>16}" for p in PARTS))
        for way, parts in rnd["searches"].items():
            print(f"  {way:10}" + "".join(f"{parts[p]['p50']:>8.2f} /{parts[p]['p95']:>6.2f}"
                                          for p in PARTS))
    print(f"same results either way: {'yes' if r['same_answers'] else 'NO'}")
    if not r["each_way_as_named"]:
        print("NOT MEASURED: the packed way read no packed rows, or the columns way some")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="a server_latency.py workdir (ws/ and index/), copied, not changed")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", type=int, default=300, help="queries a round (300)")
    parser.add_argument("--no-memory-copy", action="store_true",
                        help="read from LanceDB below 50k chunks too (no in-memory copy)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path, default=RESULTS / "packed_fields.json",
                        help="where the figures go too (bench/results/packed_fields.json)")
    args = parser.parse_args()
    problem = workdir_problem(args.workdir)
    if problem:
        parser.error(problem)
    if args.rounds < 1 or args.queries < 1:
        parser.error("--rounds and --queries are counts of at least 1")
    result = run(args)
    emit(result, args, print_table)
    return 0 if result["same_answers"] and result["each_way_as_named"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
