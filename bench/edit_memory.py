"""A serving process's memory over many saves: does it level off or keep growing?

Works on a workdir of ``server_latency.py`` (``ws/`` and ``index/``; at 100k chunks, the one
its ``--stand-in-vectors`` builds). Each checkout (this tree, and ``--baseline DIR``, a git
worktree of an older commit) runs in a fresh process on a fresh ``cp -a`` copy of it: the
workspace opened as the server opens it (allocators as the ``rag-lsp`` command sets them,
indexing's model calls meant for a child process, the index under the server's name), 40
searches, then ``--rounds`` rounds of: ``--files`` files saved with new content,
``Workspace.index()`` (as a server does once saves settle: at 100k chunks each compacts and
adds a segment to the ANN index, trained again past four), and ``--searches`` searches. The
new chunks get stand-in vectors (``server_latency.py --stand-in-vectors``; the shared
embedding cache is off): the server embeds in a child process, so the model's memory is not
this process's. After each round freed heap is handed back (as the server does when idle)
and RSS is read: what the process holds for good. The checkouts run one after the other,
not at once: their RSS is their own, but their seconds are only comparable on a quiet machine.

A day of work is not only saves: with ``--pull-every N`` every Nth round rewrites
``--pull-files`` files instead (a pull or a branch switch; 127 is 3 % of the 100k workdir's
files), a run that folds its batches into the indexes as it goes and so ends with its ANN
index trained again as one segment. Each round also records the compactions it ran (seconds,
and of those the ANN index's training), the index's segments after them, the index folder's
size on disk, and the cyclic garbage collector's full collections (one inside a search is
that search's time too; the process keeps its long-lived objects out of them, as the
language server does): whether any of them creeps up over the day. A compaction deletes the
versions older than a minute (readers may still be on them), so rounds closer together than
a day's saves keep more on disk; ``--pause`` spaces them out.

    .venv/bin/python bench/edit_memory.py --workdir /tmp/bench/lat100k --rounds 40
    .venv/bin/python bench/edit_memory.py --workdir /tmp/bench/lat100k --baseline /tmp/wt-before
    .venv/bin/python bench/edit_memory.py --workdir /tmp/bench/lat100k --rounds 24 --pull-every 6 \
        --pause 65
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Nothing heavy before the child's set-up (see bench_basics)
from bench_basics import (  # this script's folder is on the path
    checkouts,
    folder_bytes,
    pct,
    workdir_problem,
)
from engine_latency import run_child
from index_workspace import RESULTS

HERE = Path(__file__).resolve().parent
WARM_UP = 40


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def is_pull(round_index: int, pull_every: int) -> bool:
    """Whether round ``round_index`` (from 0) is a pull: every ``pull_every``th round, the
    first of them the ``pull_every``th (0: none)."""
    return pull_every > 0 and (round_index + 1) % pull_every == 0


def recording_compactions() -> list:
    """Every compaction from here on: its CompactionTimes (None from a checkout whose
    ``optimize`` returned nothing), the ANN index's segments after it (read by the store's own
    count; None from a checkout without it) and the seconds that reading took, which the
    bench's own look adds to the run's (the store's own method wrapped)."""
    from rag_lsp.store.lance_store import ChunkStore

    try:
        from rag_lsp.store.vector_index import index_segments
    except ImportError:
        index_segments = None

    seen: list = []
    optimize = ChunkStore.optimize

    def recorded(store, *args, **kwargs):
        times = optimize(store, *args, **kwargs)
        started = time.perf_counter()
        segments = (index_segments(store._chunks)  # noqa: SLF001 (a bench's look)
                    if index_segments is not None else None)
        seen.append((times, segments, time.perf_counter() - started))
        return times

    ChunkStore.optimize = recorded  # type: ignore[method-assign]
    return seen


def timing_full_collections() -> list[float]:
    """The milliseconds of each full collection of the cyclic garbage collector from here on,
    appended as each ends: one inside a search is the search's time too."""
    ended: list[float] = []
    started: list[float] = []

    def note(phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            started[:] = [time.perf_counter()]
        elif started:
            ended.append((time.perf_counter() - started.pop()) * 1000)

    gc.callbacks.append(note)
    return ended


def child(work: Path, rounds: int, files: int, searches: int, seed: int, pull_every: int = 0,
          pull_files: int = 0, pause: float = 0.0) -> None:
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)  # before LanceDB, Arrow or a thread starts
    from server_latency import make_queries, open_copied_workdir, rewrite, stand_in_vectors

    import rag_lsp

    ws = open_copied_workdir(work)
    # As the language server does once its folders are open. An older checkout may not have
    # it: the result says whether this ran, as unfrozen runs' searches and collections are
    # not comparable with frozen ones.
    freeze = getattr(rag_lsp.memory, "freeze_long_lived_objects", None)
    if freeze is not None:
        freeze()
    root, embedder = ws.root, ws.embedder
    queries = make_queries(WARM_UP + rounds * searches, seed)
    for query in queries[:WARM_UP]:
        ws.search(query)
    time.sleep(2)  # anything loading in the background after the first searches
    rag_lsp.memory.return_freed_memory()
    out: dict = {"code": str(Path(rag_lsp.__file__).parent.parent),
                 "chunks": ws.status().chunks, "idle_mb": round(rss_mb()),
                 "frozen": freeze is not None, "rounds": []}
    paths = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".md"))
    most = max(files, pull_files if pull_every else 0)
    if most > len(paths):
        raise SystemExit(f"a round cannot rewrite {most} files: the workdir has {len(paths)}; "
                         "ask for fewer (--files, --pull-files)")
    rng = random.Random(seed)
    embedder.embed = stand_in_vectors(embedder.dimension)  # type: ignore[method-assign]
    compactions = recording_compactions()
    index_folder = work / "index"
    out["index_mb"] = round(folder_bytes(index_folder) / 2**20)
    full_collections = timing_full_collections()
    for n in range(rounds):
        if n:
            time.sleep(pause)
        pull = is_pull(n, pull_every)
        changed = pull_files if pull else files
        rewrite(rng.sample(paths, k=changed), rng.randrange(1 << 30))
        before, collections_before = len(compactions), len(full_collections)
        started = time.perf_counter()
        ws.index()
        ran = compactions[before:]
        index_seconds = time.perf_counter() - started - sum(look for *_, look in ran)
        took = []
        for query in queries[WARM_UP + n * searches: WARM_UP + (n + 1) * searches]:
            started = time.perf_counter()
            ws.search(query)
            took.append((time.perf_counter() - started) * 1000)
        rag_lsp.memory.return_freed_memory()
        out["rounds"].append({
            "files": changed, "pull": pull, "rss_mb": round(rss_mb()),
            "index_s": round(index_seconds, 1),
            # None: not recorded (an older checkout's optimize returned nothing)
            "compactions_s": None if any(t is None for t, *_ in ran) else
            [round(t.seconds, 1) for t, *_ in ran],
            "training_s": None if any(t is None for t, *_ in ran) else
            [round(t.training_seconds, 1) for t, *_ in ran if t.training_seconds is not None],
            "segments": ran[-1][1] if ran else None,
            "index_mb": round(folder_bytes(index_folder) / 2**20),
            "search_ms": [round(t, 1) for t in took],
            "full_gc_ms": [round(t, 1) for t in full_collections[collections_before:]]})
        r = out["rounds"][-1]
        print(f"[{time.strftime('%H:%M:%S')}] round {n + 1} ({changed} files): RSS "
              f"{r['rss_mb']} MB, index {index_seconds:.1f} s, compactions {r['compactions_s']}"
              f" (trainings {r['training_s']}), segments {r['segments']}, index folder "
              f"{r['index_mb']} MB, full collections {r['full_gc_ms']} ms", file=sys.stderr,
              flush=True)
    print(json.dumps(out))


def measure(code: Path, workdir: Path, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="edit-memory-") as tmp:
        work = Path(tmp) / "copy"
        subprocess.run(["cp", "-a", str(workdir), str(work)], check=True)
        try:
            return run_child(str(Path(__file__).resolve()), code,
                             [str(work), str(args.rounds), str(args.files), str(args.searches),
                              str(args.seed), str(args.pull_every), str(args.pull_files),
                              str(args.pause)],
                             work, 7200)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def summary(run: dict) -> dict:
    rss = [r["rss_mb"] for r in run["rounds"]]
    took = [t for r in run["rounds"] for t in r["search_ms"]]
    quarter = max(1, len(rss) // 4)
    return {"idle_mb": run["idle_mb"], "after_first_round_mb": rss[0], "last_mb": rss[-1],
            "max_mb": max(rss),
            "growth_per_round_last_quarter_mb": round((rss[-1] - rss[-quarter - 1]) / quarter, 1)
            if len(rss) > quarter else None,
            "index_s_total": round(sum(r["index_s"] for r in run["rounds"]), 1),
            "search_p50_ms": round(pct(took, 0.5), 1) if took else None,
            "search_p95_ms": round(pct(took, 0.95), 1) if took else None,
            **day_summary(run)}


def _span(values: list) -> list | None:
    return [min(values), max(values)] if values else None


def day_summary(run: dict) -> dict:
    """The trainings, segments, index folder and full collections of ``run``'s rounds; None
    where they were not recorded (a bench or checkout before them)."""
    rounds = run["rounds"]
    trainings = [r.get("training_s") for r in rounds]
    recorded = all(t is not None for t in trainings)
    folder = [(r.get("index_mb"), bool(r.get("training_s"))) for r in rounds]
    collections = [t for r in rounds for t in r.get("full_gc_ms", ())]
    return {
        "trainings": sum(map(len, trainings)) if recorded else None,
        "training_s_total": round(sum(map(sum, trainings)), 1) if recorded else None,
        "segments_max": max((r["segments"] for r in rounds if r.get("segments") is not None),
                            default=None),
        "full_gc_ms_max": max(collections, default=None),
        "index_mb_at_start": run.get("index_mb"),
        # After a training the folder holds the version before it too, until the next
        # compaction deletes it: the two kinds of round apart.
        "index_mb_without_training": _span([mb for mb, trained in folder
                                            if mb is not None and not trained]),
        "index_mb_after_training": _span([mb for mb, trained in folder
                                          if mb is not None and trained])}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), *map(int, sys.argv[3:9]), float(sys.argv[9]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="a server_latency.py workdir (ws/ and index/), left as it is")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure first")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of saves (20)")
    parser.add_argument("--files", type=int, default=3, help="files saved a round (3)")
    parser.add_argument("--searches", type=int, default=5, help="searches a round (5)")
    parser.add_argument("--pull-every", type=int, default=0, metavar="N",
                        help="every Nth round rewrites --pull-files files instead: a pull or "
                             "a branch switch (0: never, the default)")
    parser.add_argument("--pull-files", type=int, default=127,
                        help="files such a round rewrites (127: 3%% of the 100k workdir's)")
    parser.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                        help="between rounds (0); past 60 a compaction deletes the previous "
                             "round's old versions, as over a day of saves")
    parser.add_argument("--seed", type=int, default=7, help="which files, which queries (7)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args()
    if (min(args.rounds, args.files, args.pull_files) < 1
            or min(args.pull_every, args.pause, args.searches) < 0):
        parser.error("--rounds, --files and --pull-files take 1 or more; --pull-every, "
                     "--pause and --searches 0 or more")
    problem = workdir_problem(args.workdir)
    if problem:
        parser.error(problem)
    codes = checkouts(HERE.parent, args.baseline)
    runs = {name: measure(code, args.workdir.resolve(), args) for name, code in codes.items()}
    result = {"workdir": str(args.workdir), "rounds": args.rounds, "files": args.files,
              "pull_every": args.pull_every, "pull_files": args.pull_files,
              "pause": args.pause, "seed": args.seed,
              "searches": args.searches, "chunks": next(iter(runs.values()))["chunks"],
              "summary": {name: summary(run) for name, run in runs.items()}, "runs": runs,
              "date": time.strftime("%Y-%m-%d %H:%M")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "edit_memory.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    pulls = (f" ({args.pull_files} files every {args.pull_every} rounds)"
             if args.pull_every else "")
    print(f"{result['chunks']} chunks; {args.rounds} rounds of {args.files} files saved{pulls}, "
          f"Workspace.index() and {args.searches} searches; RSS after each round, MB")
    width = max(len(n) for n in runs)
    for name, run in runs.items():
        print(f"  {name:<{width}}  idle {run['idle_mb']:>4}  "
              + " ".join(str(r["rss_mb"]) for r in run["rounds"]))
    for name, s in result["summary"].items():
        print(f"  {name:<{width}}  last {s['last_mb']} MB, max {s['max_mb']}, growth a round over "
              f"the last quarter {s['growth_per_round_last_quarter_mb']} MB; index runs "
              f"{s['index_s_total']} s in all; searches p50 / p95 {s['search_p50_ms']} / "
              f"{s['search_p95_ms']} ms; {s['trainings']} trainings of the ANN index "
              f"({s['training_s_total']} s), at most {s['segments_max']} segments; index folder "
              f"{s['index_mb_at_start']} MB at the start, {s['index_mb_without_training']} "
              f"after rounds without a training, {s['index_mb_after_training']} after one; the "
              f"longest full garbage collection {s['full_gc_ms_max']} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
