"""Searches while an index run writes, in process: which of them found the in-memory copy
stale after a write (and asked LanceDB instead), which ran beside a compaction, and what each
kind cost.

Each measurement is a fresh process on a fresh copy of a workspace and its index (default:
``server_latency.py``'s 12k-chunk one). It rewrites ``--rewrite`` of the copy's files with new
generated content (``server_latency.py``'s rewrite), warms up as ``engine_latency.py`` does,
then runs ``Workspace.index()`` in a thread at the background priority (as the language
server's writer thread; indexing's model calls in a child process, as the servers have them)
while the main thread searches every ``--spacing`` seconds until the run ends. A search is
"stale" when the store found the in-memory copy older than the table at least once during it
(``VectorCache.current`` answered nothing); "beside a compaction" when it overlapped one of
the run's ``ChunkStore.optimize`` calls (a compaction, the ANN index trained again, the
caches connected again after). With ``--baseline DIR`` (another checkout) the two take turns,
the order swapped each round.

    .venv/bin/python bench/search_while_indexing.py --root /tmp/bench/latency/ws \\
        --index /tmp/bench/latency/index/ws-0140dbdd2a --baseline /tmp/wt-before
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

# Nothing heavy before the child's set-up (see bench_basics)
from bench_basics import pct  # this script's folder is on the import path
from engine_latency import run_child

HERE = Path(__file__).resolve().parent
WARM_UP, SETTLE_SECONDS = 30, 6.0


def overlaps(start: float, end: float, spans: list[list[float]]) -> bool:
    """Whether [start, end] overlaps any of ``spans`` ([begun, ended]; ended 0: still
    running when the search ended)."""
    return any(begun < end and (ended or end) > start for begun, ended in spans)


def child(index_dir: Path, root: Path, share: float, spacing: float, seed: int) -> None:
    # What the `rag-lsp` command does first.
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)
    from server_latency import make_queries, rewrite

    import rag_lsp
    from rag_lsp.config import Settings
    from rag_lsp.priority import run_in_background
    from rag_lsp.store import vector_cache
    from rag_lsp.store.lance_store import ChunkStore
    from rag_lsp.workspace import Workspace

    stale = threading.local()
    current = vector_cache.VectorCache.current
    compactions: list[list[float]] = []  # [start, end] of each optimize, end 0 while it runs
    optimize = ChunkStore.optimize

    def timed_optimize(self, *args, **kwargs):
        span = [time.perf_counter(), 0.0]
        compactions.append(span)
        try:
            return optimize(self, *args, **kwargs)
        finally:
            span[1] = time.perf_counter()

    ChunkStore.optimize = timed_optimize

    def marking_current(self, version):  # the searching thread's lookups only
        matrix = current(self, version)
        if threading.current_thread() is threading.main_thread() and matrix is None:
            stale.seen = True
        return matrix

    vector_cache.VectorCache.current = marking_current
    # Without the shared embedding cache: a second process would reuse the first's vectors.
    ws = Workspace.open(root, Settings.from_dict({"indexPath": str(index_dir),
                                                  "embeddingCache": False}),
                        bulk_in_child=True)
    # As the language server does once its folders are open: what is loaded for good leaves
    # the collector's full collections (else one lands in ~1 search in several hundred, ~60 ms).
    rag_lsp.memory.freeze_long_lived_objects()
    for query in make_queries(WARM_UP, seed + 1000):
        ws.search(query)
    time.sleep(SETTLE_SECONDS)  # the in-memory copy loads in the background
    files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".md"))
    rng = random.Random(seed)
    rewrite(rng.sample(files, max(1, int(len(files) * share))), rng.randrange(1 << 30))
    report: dict = {}

    def index_run() -> None:
        run_in_background()  # as the language server's writer thread (server/jobs.py)
        started = time.perf_counter()
        ran = ws.index()
        report.update(seconds=round(time.perf_counter() - started, 1),
                      chunks_written=ran.chunks_written)

    runner = threading.Thread(target=index_run)
    runner.start()
    searches = []
    for query in make_queries(100_000, seed):
        if not runner.is_alive():
            break
        stale.seen = False
        started = time.perf_counter()
        ws.search(query)
        searches.append([(time.perf_counter() - started) * 1000, stale.seen, started,
                         time.perf_counter()])
        time.sleep(spacing)
    runner.join()
    for search in searches:  # [ms, stale, start, end] -> [ms, stale, beside a compaction]
        start, end = search.pop(2), search.pop(2)
        search.append(overlaps(start, end, compactions))
    report["compactions"] = len(compactions)
    print(json.dumps({"code": str(Path(rag_lsp.__file__).parent.parent), "searches": searches,
                      **report}))


def measure(code: Path, index_dir: Path, root: Path, args: argparse.Namespace,
            seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="search-while-indexing-") as tmp:
        copy_root, copy_index = Path(tmp) / "ws", Path(tmp) / "index"
        shutil.copytree(root, copy_root)  # copy2: mtimes kept, so only the rewrite is new
        shutil.copytree(index_dir, copy_index)
        return run_child(str(Path(__file__).resolve()), code,
                         [str(copy_index), str(copy_root), str(args.rewrite), str(args.spacing),
                          str(seed)], copy_root, 3600)


def figures(runs: list[dict]) -> dict:
    every = [s for run in runs for s in run["searches"]]

    def kind(rows: list[list]) -> dict:
        ms = [r[0] for r in rows]
        if not ms:
            return {"searches": 0}
        return {"searches": len(ms), "share": round(len(ms) / len(every), 3),
                "p50": round(statistics.median(ms), 1), "p95": round(pct(ms, 0.95), 1),
                "p99": round(pct(ms, 0.99), 1)}

    return {"all": kind(every), "fresh copy": kind([r for r in every if not r[1]]),
            "stale copy": kind([r for r in every if r[1]]),
            "beside a compaction": kind([r for r in every if r[2]]),
            "no compaction beside": kind([r for r in every if not r[2]]),
            "compactions": [run.get("compactions") for run in runs],
            "p50_per_run": [round(statistics.median([s[0] for s in run["searches"]]), 1)
                            for run in runs],
            "p95_per_run": [round(pct([s[0] for s in run["searches"]], 0.95), 1)
                            for run in runs],
            "index_seconds": [run.get("seconds") for run in runs],
            "chunks_written": [run.get("chunks_written") for run in runs]}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]),
              int(sys.argv[6]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("/tmp/bench/latency/ws"),
                        help="the workspace folder (default: %(default)s)")
    parser.add_argument("--index", type=Path, required=True,
                        help="its index folder (the one with manifest.json)")
    parser.add_argument("--rewrite", type=float, default=0.3,
                        help="share of the files rewritten before the run (%(default)s)")
    parser.add_argument("--spacing", type=float, default=0.3,
                        help="seconds between searches (%(default)s)")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure beside")
    parser.add_argument("--rounds", type=int, default=1, help="processes per checkout")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not (args.index / "manifest.json").is_file():
        parser.error(f"{args.index} has no manifest.json: give the index folder itself")
    codes = {"this tree": HERE.parent}
    if args.baseline:
        codes = {"baseline": args.baseline.resolve(), **codes}
    runs: dict[str, list[dict]] = {name: [] for name in codes}
    for round_ in range(args.rounds):
        for name in (codes if round_ % 2 == 0 else reversed(list(codes))):
            run = measure(codes[name], args.index, args.root, args, seed=100 + round_)
            runs[name].append(run)
            stale = sum(1 for s in run["searches"] if s[1])
            print(f"[{time.strftime('%H:%M:%S')}] {name}, round {round_ + 1}: "
                  f"{len(run['searches'])} searches, {stale} on a stale copy, index run "
                  f"{run.get('seconds')} s", file=sys.stderr, flush=True)
    results = {name: figures(r) for name, r in runs.items()}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for name, f in results.items():
        print(f"\n{name}: {args.rounds} index run(s) of {f['index_seconds']} s, "
              f"{f['chunks_written']} chunks written, {f['compactions']} optimize calls; "
              f"p50 / p95 per run {f['p50_per_run']} / {f['p95_per_run']} ms")
        for kind in ("all", "fresh copy", "stale copy", "beside a compaction",
                     "no compaction beside"):
            k = f[kind]
            if not k["searches"]:
                print(f"  {kind:<20} none")
                continue
            print(f"  {kind:<20} {k['searches']:4d} searches ({k['share']:.0%})  p50 "
                  f"{k['p50']:6.1f}  p95 {k['p95']:6.1f}  p99 {k['p99']:6.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
