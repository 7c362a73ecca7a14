"""What searches pay for the patches an in-memory copy holds, and what making it compact
once the writes settle costs (``ChunkStore.settle_copy``, at an index run's end and at the
compaction after a burst of saves).

A copy of a ``server_latency.py`` workdir (below 50k chunks, where searches answer from the
in-memory copy) is opened in this process, set up as the ``rag-lsp`` command sets itself up.
Each round rewrites ``--rewrite`` of its files and re-indexes them with stand-in vectors (the
model's bulk work taken out: ``paced_model``, no sleep), with the run's own settle held back,
so the copy is left as the patches made it (rows masked out, rows appended, replaced rows'
vectors still scored). ``Workspace.search`` (real query model) is timed with the patched copy
and a compact copy of it in turn, query by query, the order swapped each query (so each copy
gets the query's model call half the time: the second search takes the cached vector); both
must give the same results. Then the store makes the patched copy compact as at a run's end (time,
CPU, RSS peak), and the RSS once the patched copy is let go is compared with before.

    .venv/bin/python bench/settled_copy.py --workdir /tmp/bench/lat12k
    .venv/bin/python bench/settled_copy.py --workdir /tmp/bench/lat12k --rounds 1 --json
"""

from __future__ import annotations

import argparse
import gc
import resource
import shutil
import tempfile
import time
from pathlib import Path

# Nothing heavy before the process is set up as the command (see bench_basics)
from bench_basics import emit, log, pct, workdir_problem  # this script's folder is on the path
from copy_load import PeakRss, rss_mb

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PARTS = ("search", "vectorMs", "lexicalMs", "rankingMs")


def cpu_seconds() -> float:
    """This thread's CPU time (the compaction runs on it; the RSS sampler's is not counted)."""
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def figures(values: list[float]) -> dict:
    return {"p50": round(pct(values, 0.5), 2), "p95": round(pct(values, 0.95), 2)}


def compare(ws, store, copies: dict, queries: list[str]) -> tuple[dict, int]:  # noqa: ANN001
    """Each query searched with each copy in turn (``ws.search``, the copy swapped in), the
    order swapped each query: each copy's times, part by part, and the number of queries
    whose results differ between them."""
    times = {way: {part: [] for part in PARTS} for way in copies}
    differ = 0
    for n, query in enumerate(queries):
        answers = set()
        for way in list(copies) if n % 2 else list(copies)[::-1]:
            store._vectors._matrix = copies[way]  # noqa: SLF001 - the copy searched
            began = time.perf_counter()
            response = ws.search(query)
            times[way]["search"].append((time.perf_counter() - began) * 1000)
            wire = response.timings.to_wire()
            for part in PARTS[1:]:
                times[way][part].append(wire.get(part, 0.0))
            answers.add(tuple((r.path, r.start_line, round(r.score, 5))
                              for r in response.results))
        differ += len(answers) > 1
    return times, differ


def run(args: argparse.Namespace) -> dict:
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)
    import random

    import server_latency
    from paced_model.sitecustomize import pace

    from rag_lsp.embedding.embedder import OnnxEmbedder
    from rag_lsp.store.lance_store import TEXT_IN_MEMORY_BYTES, ChunkStore
    from rag_lsp.store.vector_cache import SETTLE_SHARE_MIN

    pace(OnnxEmbedder, 0.0)  # re-indexes with stand-in vectors: the copy's state is the point
    settle = ChunkStore.settle_copy
    out: dict = {"rounds": []}
    with tempfile.TemporaryDirectory(prefix="rag-settled-") as tmp:
        work = Path(tmp) / "work"
        shutil.copytree(args.workdir, work, symlinks=True)
        ws = server_latency.open_copied_workdir(work)
        for query in server_latency.make_queries(40, 99):  # the copy loads, the model warms
            ws.search(query)
        time.sleep(3)
        store = ws._index.store()  # noqa: SLF001 - what the searches read
        paths = sorted(p for p in ws.root.rglob("*") if p.suffix in (".py", ".md"))
        if store.vectors_in_memory() is None:
            raise SystemExit(f"{args.workdir}: no in-memory copy (past 50k chunks searches "
                             "ask LanceDB): nothing to measure")
        rng = random.Random(args.seed)
        for round_ in range(args.rounds):
            server_latency.rewrite(rng.sample(paths, k=max(1, int(len(paths) * args.rewrite))),
                                   rng.randrange(1 << 30))
            ChunkStore.settle_copy = lambda self: False  # the copy as the run's patches left it
            try:
                ws.index()
            finally:
                ChunkStore.settle_copy = settle
            patched = store.vectors_in_memory()
            assert patched is not None
            held = {"rows": len(patched.row_ids), "live": patched.live_rows,
                    "appended": patched.appended_rows, "exact_rows": patched.exact.rows,
                    "unsettled_share": round(patched.unsettled_share, 3)}
            if patched.unsettled_share < SETTLE_SHARE_MIN:  # (a patch past DEAD_SHARE_MAX
                # makes one compact copy itself; few rows changed are left as they are)
                log(f"round {round_ + 1}: {held}; less left over than the store makes compact "
                    f"({SETTLE_SHARE_MIN} of the live rows): nothing to compare")
                out["rounds"].append({"copy_before": held, "nothing_to_settle": True})
                continue
            # The searches compare the patched copy with a compact copy of it made beside
            # (the store's own may move the vectors within the patched copy's room).
            compact = patched.patched(patched.version, (), (), TEXT_IN_MEMORY_BYTES,
                                      compact=True)
            assert compact is not None and compact.unsettled_share == 0
            times, differ = compare(ws, store, {"patched": patched, "settled": compact},
                                    server_latency.make_queries(args.queries, 20 + round_))
            # Then the store's own, from the patched copy, as at a run's end: its time, and
            # the memory held before it and once the patched copy is let go.
            store._vectors._matrix = patched  # noqa: SLF001
            del compact
            gc.collect()
            rag_lsp.memory.return_freed_memory()
            before, cpu = rss_mb(), cpu_seconds()
            began = time.perf_counter()
            with PeakRss() as peak:
                made = settle(store)
            settle_ms = (time.perf_counter() - began) * 1000
            settle_cpu_ms = (cpu_seconds() - cpu) * 1000
            settled = store.vectors_in_memory()
            assert made and settled is not None and settled.unsettled_share == 0
            del patched, settled
            gc.collect()
            rag_lsp.memory.return_freed_memory()
            after = rss_mb()
            result = {
                "copy_before": held, "settle_ms": round(settle_ms, 1),
                "settle_cpu_ms": round(settle_cpu_ms, 1),
                "rss_before_mb": round(before, 1),
                "rss_peak_above_mb": round(peak.peak - before, 1),
                "rss_after_mb": round(after, 1), "queries": args.queries,
                "answers_differ": differ,
                "searches": {way: {part: figures(v) for part, v in parts.items()}
                             for way, parts in times.items()},
            }
            out["rounds"].append(result)
            log(f"round {round_ + 1}: {held}; settled in {result['settle_ms']} ms, "
                f"RSS peak +{result['rss_peak_above_mb']} MB, {before:.0f} -> {after:.0f} MB "
                f"with the patched copy let go; answers differ for {differ} queries")
    out["same_answers"] = all(r.get("answers_differ", 0) == 0 for r in out["rounds"])
    return out


def print_table(r: dict) -> None:
    for n, rnd in enumerate(r["rounds"], 1):
        c = rnd["copy_before"]
        if rnd.get("nothing_to_settle"):
            print(f"round {n}: the patches left {c['unsettled_share']} of the live rows' worth "
                  "beyond a compact copy, less than the store makes compact: nothing to compare")
            continue
        print(f"round {n}: the patched copy {c['rows']} rows ({c['live']} live, {c['appended']} "
              f"appended), {c['exact_rows']} exact vectors; made compact in {rnd['settle_ms']} "
              f"ms ({rnd['settle_cpu_ms']} ms CPU), RSS peak +{rnd['rss_peak_above_mb']} MB, "
              f"{rnd['rss_before_mb']:.0f} -> {rnd['rss_after_mb']:.0f} MB after")
        print(f"  {'p50 / p95 ms':14}" + "".join(f"{p.removesuffix('Ms'):>16}" for p in PARTS))
        for way, parts in rnd["searches"].items():
            print(f"  {way:14}" + "".join(f"{parts[p]['p50']:>8.2f} /{parts[p]['p95']:>6.2f}"
                                          for p in PARTS))
    print(f"same results from both copies: {'yes' if r['same_answers'] else 'NO'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="a server_latency.py workdir (ws/ and index/), copied, not changed")
    parser.add_argument("--rewrite", type=float, default=0.3,
                        help="share of the files rewritten and re-indexed each round (0.3)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=300, help="queries a round (300)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path, default=RESULTS / "settled_copy.json",
                        help="where the figures go too (bench/results/settled_copy.json)")
    args = parser.parse_args()
    problem = workdir_problem(args.workdir)
    if problem:
        parser.error(problem)
    if not 0 < args.rewrite <= 1:
        parser.error(f"--rewrite is a share of the files, above 0 and at most 1: got "
                     f"{args.rewrite}")
    result = run(args)
    emit(result, args, print_table)
    return 0 if result["same_answers"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
