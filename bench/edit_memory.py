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

    .venv/bin/python bench/edit_memory.py --workdir /tmp/bench/lat100k --rounds 40
    .venv/bin/python bench/edit_memory.py --workdir /tmp/bench/lat100k --baseline /tmp/wt-before
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Nothing heavy before the child's set-up (see bench_basics)
from bench_basics import checkouts, pct, workdir_problem  # this script's folder is on the path
from engine_latency import run_child
from index_workspace import RESULTS

HERE = Path(__file__).resolve().parent
WARM_UP = 40


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def child(work: Path, rounds: int, files: int, searches: int, seed: int) -> None:
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)  # before LanceDB, Arrow or a thread starts
    from server_latency import make_queries, open_copied_workdir, rewrite, stand_in_vectors

    import rag_lsp

    ws = open_copied_workdir(work)
    root, embedder = ws.root, ws.embedder
    queries = make_queries(WARM_UP + rounds * searches, seed)
    for query in queries[:WARM_UP]:
        ws.search(query)
    time.sleep(2)  # anything loading in the background after the first searches
    rag_lsp.memory.return_freed_memory()
    out: dict = {"code": str(Path(rag_lsp.__file__).parent.parent),
                 "chunks": ws.status().chunks, "idle_mb": round(rss_mb()), "rounds": []}
    paths = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".md"))
    rng = random.Random(seed)
    embedder.embed = stand_in_vectors(embedder.dimension)  # type: ignore[method-assign]
    for n in range(rounds):
        rewrite(rng.sample(paths, k=files), rng.randrange(1 << 30))
        started = time.perf_counter()
        ws.index()
        index_seconds = time.perf_counter() - started
        took = []
        for query in queries[WARM_UP + n * searches: WARM_UP + (n + 1) * searches]:
            started = time.perf_counter()
            ws.search(query)
            took.append((time.perf_counter() - started) * 1000)
        rag_lsp.memory.return_freed_memory()
        out["rounds"].append({"rss_mb": round(rss_mb()), "index_s": round(index_seconds, 1),
                              "search_ms": [round(t, 1) for t in took]})
        print(f"[{time.strftime('%H:%M:%S')}] round {n + 1}: RSS {out['rounds'][-1]['rss_mb']} MB,"
              f" index {index_seconds:.1f} s", file=sys.stderr, flush=True)
    print(json.dumps(out))


def measure(code: Path, workdir: Path, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="edit-memory-") as tmp:
        work = Path(tmp) / "copy"
        subprocess.run(["cp", "-a", str(workdir), str(work)], check=True)
        try:
            return run_child(str(Path(__file__).resolve()), code,
                             [str(work), str(args.rounds), str(args.files), str(args.searches),
                              str(args.seed)], work, 7200)
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
            "search_p95_ms": round(pct(took, 0.95), 1) if took else None}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
              int(sys.argv[6]))
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
    parser.add_argument("--seed", type=int, default=7, help="which files, which queries (7)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args()
    problem = workdir_problem(args.workdir)
    if problem:
        parser.error(problem)
    codes = checkouts(HERE.parent, args.baseline)
    runs = {name: measure(code, args.workdir.resolve(), args) for name, code in codes.items()}
    result = {"workdir": str(args.workdir), "rounds": args.rounds, "files": args.files,
              "searches": args.searches, "chunks": next(iter(runs.values()))["chunks"],
              "summary": {name: summary(run) for name, run in runs.items()}, "runs": runs,
              "date": time.strftime("%Y-%m-%d %H:%M")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "edit_memory.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['chunks']} chunks; {args.rounds} rounds of {args.files} files saved, "
          f"Workspace.index() and {args.searches} searches; RSS after each round, MB")
    width = max(len(n) for n in runs)
    for name, run in runs.items():
        print(f"  {name:<{width}}  idle {run['idle_mb']:>4}  "
              + " ".join(str(r["rss_mb"]) for r in run["rounds"]))
    for name, s in result["summary"].items():
        print(f"  {name:<{width}}  last {s['last_mb']} MB, max {s['max_mb']}, growth a round over "
              f"the last quarter {s['growth_per_round_last_quarter_mb']} MB; index runs "
              f"{s['index_s_total']} s in all; searches p50 / p95 {s['search_p50_ms']} / "
              f"{s['search_p95_ms']} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
