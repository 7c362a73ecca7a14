"""A first index past 50k chunks: what its compactions and ANN trainings cost, with searches
during it and without.

Past ``POSTINGS_MAX_ROWS`` (50k) chunks every lexical search reads LanceDB's full-text index,
and each row outside it one by one, so there an indexing run folds every batch into it as it
is written (a compaction), in batches of ``LARGE_INDEX_BATCH_CHUNKS`` (2,048; see
``rag_lsp/indexing/indexer.py``); below it, batches of 512, compacted every
``OPTIMIZE_EVERY_BATCHES``. Each compaction also adds the new
rows to the ANN index as a segment of its own, and past ``MAX_SEGMENTS`` the index is trained
again in a child process. This bench builds the same generated workspace's first index
(stand-in vectors drawn from a hash of each chunk's text: the store's work in minutes, where
the model's would take an hour) in up to three ways, each in a fresh process:

- ``quiet``: no search during the run;
- ``searched``: a lexical search every ``--interval`` seconds from the main thread, the run
  on a thread below its priority, as in the server;
- ``searched-small-batches``: the same searches, past 50k chunks in batches of 512 each
  folded in, as rag-lsp indexed while searched before the sixty-ninth session.

For each: the run's seconds, its compactions (``ChunkStore.optimize``: calls, seconds, those
past 50k chunks) and ANN trainings in a child (calls, seconds), and the searches' p50 / p95 /
p99 (ms) past 50k chunks. The workspace is generated once into ``--workdir`` (``ws/``), and
each build writes a fresh index beside it.

    .venv/bin/python bench/first_index_compactions.py                  # ~101k chunks, ~15 min
    .venv/bin/python bench/first_index_compactions.py --files 2500 --builds quiet,searched
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
from pathlib import Path

from bench_basics import pct

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
BUILDS = ("quiet", "searched", "searched-small-batches")


def one_build(build: str, work: Path, interval: float) -> dict:
    """One build, in this (fresh) process: the index under ``work/index-<build>``."""
    sys.path.insert(0, str(REPO))
    from rag_lsp import memory

    memory.set_up_process()  # as `rag-lsp` does, before any library starts a thread
    from server_latency import query_stream, stand_in_vectors

    from rag_lsp.config import Settings
    from rag_lsp.indexing import indexer
    from rag_lsp.priority import run_in_background
    from rag_lsp.store import lance_store
    from rag_lsp.workspace import Workspace, load_embedder

    if build == "searched-small-batches":
        indexer.LARGE_INDEX_BATCH_CHUNKS = indexer.WRITE_BATCH_CHUNKS
    calls: dict[str, list[tuple[int, float]]] = {"optimize": [], "retrain": []}

    def timed(function, key: str):
        def wrapper(*args, **kwargs):
            # the chunks table's rows before the call (optimize's first argument is the store)
            rows = args[0]._chunks.count_rows() if key == "optimize" else 0  # noqa: SLF001
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                calls[key].append((rows, time.perf_counter() - started))
        return wrapper

    lance_store.ChunkStore.optimize = timed(lance_store.ChunkStore.optimize, "optimize")
    lance_store.retrain_in_child = timed(lance_store.retrain_in_child, "retrain")

    root, index = work / "ws", work / f"index-{build}"
    shutil.rmtree(index, ignore_errors=True)
    embedder = load_embedder(Settings(), root)[0]
    if embedder is None:
        raise SystemExit("the model is not installed: run `make setup` first")
    embedder.embed = stand_in_vectors(embedder.dimension)  # type: ignore[method-assign]
    # Stand-in vectors must never reach a user's shared cache under the model's name.
    ws = Workspace.open(root, Settings.from_dict({"indexPath": str(index),
                                                  "embeddingCache": False}), embedder=embedder)
    outcome: dict = {}

    def run() -> None:
        import lancedb  # noqa: F401  (its worker threads start at the searches' priority)

        run_in_background()
        started = time.perf_counter()
        outcome["report"] = ws.index()
        outcome["seconds"] = time.perf_counter() - started

    writer = threading.Thread(target=run, name="rag-index")
    latencies: list[float] = []
    try:
        writer.start()
        queries = query_stream(11)
        while build != "quiet" and writer.is_alive():
            time.sleep(interval)
            started = time.perf_counter()
            ws.search(next(queries), mode="lexical")
            if ws._open_store().searches_read_full_text_index():  # noqa: SLF001
                latencies.append((time.perf_counter() - started) * 1000)
        writer.join()
    finally:
        ws.close()
    past = lance_store.POSTINGS_MAX_ROWS
    optimize, retrain = calls["optimize"], calls["retrain"]
    return {
        "build": build,
        "chunks": outcome["report"].chunks_total,
        "seconds": round(outcome["seconds"], 1),
        "compactions": len(optimize),
        "compaction_seconds": round(sum(s for _, s in optimize), 1),
        "compactions_past_50k": sum(1 for rows, _ in optimize if rows > past),
        "compaction_seconds_past_50k": round(sum(s for rows, s in optimize if rows > past), 1),
        "trainings_in_child": len(retrain),
        "training_seconds": round(sum(s for _, s in retrain), 1),
        "searches_past_50k": {"n": len(latencies), **{
            f"p{q}_ms": round(pct(latencies, q / 100), 1) if latencies else None
            for q in (50, 95, 99)}},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=4250,
                        help="files to generate (4250: ~101k chunks)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path,
                        help="the generated workspace and the builds' indexes (default: a temp "
                             "dir); an existing ws/ is used as it is")
    parser.add_argument("--builds", default=",".join(BUILDS),
                        help=f"comma-separated, in this order ({','.join(BUILDS)})")
    parser.add_argument("--interval", type=float, default=0.3,
                        help="seconds between the searched builds' searches (0.3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path, default=RESULTS / "first_index_compactions.json")
    parser.add_argument("--one", choices=BUILDS, help=argparse.SUPPRESS)  # a build's process
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="first-index-"))
    if args.one:
        print(json.dumps(one_build(args.one, work, args.interval)))
        return
    builds = [b.strip() for b in args.builds.split(",") if b.strip()]
    unknown = sorted(set(builds) - set(BUILDS))
    if unknown:
        parser.error(f"unknown builds {unknown}: choose from {', '.join(BUILDS)}")
    root = work / "ws"
    if not root.is_dir():
        sys.path.insert(0, str(REPO))
        from server_latency import generate

        print(f"generating {args.files} files in {root}", file=sys.stderr)
        generate(root, args.files, args.seed)
    results = []
    for build in builds:
        print(f"building the first index: {build}", file=sys.stderr)
        done = subprocess.run(
            [sys.executable, __file__, "--one", build, "--workdir", str(work),
             "--interval", str(args.interval)],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"the {build} build failed (exit status {done.returncode}):\n"
                     f"{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if not args.json:
            print(json.dumps(results[-1]), file=sys.stderr)
    report = {"files": len([p for p in root.rglob("*") if p.is_file()]), "builds": results,
              "command": " ".join(["bench/first_index_compactions.py", *sys.argv[1:]]),
              "date": time.strftime("%Y-%m-%d %H:%M")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{'build':<20} {'chunks':>7} {'s':>6} {'compactions (s)':>16} "
              f"{'past 50k (s)':>13} {'trainings (s)':>14} {'searches p50/p95/p99 ms':>24}")
        for r in results:
            searched = r["searches_past_50k"]
            lat = ("-" if not searched["n"] else
                   f"{searched['p50_ms']}/{searched['p95_ms']}/{searched['p99_ms']} "
                   f"({searched['n']})")
            print(f"{r['build']:<20} {r['chunks']:>7} {r['seconds']:>6} "
                  f"{r['compactions']:>5} ({r['compaction_seconds']:>6}) "
                  f"{r['compactions_past_50k']:>4} ({r['compaction_seconds_past_50k']:>6}) "
                  f"{r['trainings_in_child']:>4} ({r['training_seconds']:>6}) {lat:>24}")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
