"""Searches beside the ANN index's retraining, and its memory: in the searching process, or in
a child process.

Past 50k chunks the ANN index is trained again when the table has doubled or edits have left
it in more than four segments, and the compaction after the training rewrites every row.
Since the thirty-sixth session both run in a child process at the background priority
(``rag_lsp.store.retraining``); below the size, or when the child fails, the store runs them
in its own process, as before, and the "here" side of this bench takes that path, in the
same checkout (each side checks which process ran them).

For each round and side, in a fresh process, on a fresh ``cp -a`` copy of a
``server_latency.py`` workdir (at 100k chunks, the one ``--stand-in-vectors`` builds): the
workspace is opened as the server opens it (allocators set up as the ``rag-lsp`` command sets
them, the index under the server's name), ``--warm`` searches load what a serving process
holds, then a thread runs a hybrid search every ``--interval`` seconds while the main thread
asks for a compaction that trains the ANN index again (``MAX_SEGMENTS`` lowered to 0, so an
index in one or more segments is trained again: on a compacted table, the training takes
~2 s of both cores at 100k chunks, and the compaction after it ~2.5 s). Each search is put
to before / during / after that compaction. Also: the compaction's seconds, this process's
RSS peak during it and in the seconds after, and the peak PSS of this process and its
children (what the machine holds for them, each shared page counted once). The sides
alternate their order each round.

    .venv/bin/python bench/retraining_searches.py --workdir /tmp/bench/lat100k --rounds 2
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

from bench_basics import pct, pss_with_children_mb, workdir_problem

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
SIDES = ("here", "child")
SETTLE_SECONDS = 5.0  # searched before and after the compaction
PSS_EVERY = 0.025


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run_side(side: str, work: Path, warm: int, interval: float) -> dict:
    """One side, in this (fresh) process."""
    sys.path.insert(0, str(REPO))
    from rag_lsp import memory

    memory.set_up_process()  # as `rag-lsp` does, before any library starts a thread
    from server_latency import make_queries, open_copied_workdir

    from rag_lsp.store import lance_store, vector_index

    ws = open_copied_workdir(work)
    queries = make_queries(warm + 2000, 11)
    for query in queries[:warm]:
        ws.search(query)
    time.sleep(2)  # the in-memory copies load in the background after the first searches
    vector_index.MAX_SEGMENTS = 0  # the compaction below trains the ANN index again
    # Which process ran the steps, checked: the "here" side takes the store's own path (as
    # below the size), the "child" side must not have fallen back to it.
    ran: list[str] = []
    real_build, real_child = lance_store.build_vector_index, lance_store.retrain_in_child
    lance_store.build_vector_index = lambda *a: ran.append("here") or real_build(*a)

    def child(*args):
        outcome = real_child(*args)
        ran.append(f"child: {outcome.value}")
        return outcome

    lance_store.retrain_in_child = child
    if side == "here":
        lance_store.trains_in_a_child = lambda _rows: False
    phase, done = ["before"], threading.Event()
    latencies: list[tuple[str, float]] = []
    peaks = {"rss_mb": 0.0, "pss_with_children_mb": 0.0, "rss_after_mb": 0.0}

    def search() -> None:
        for query in queries[warm:]:
            if done.is_set():
                return
            started = time.perf_counter()
            ws.search(query)
            latencies.append((phase[0], (time.perf_counter() - started) * 1000))
            time.sleep(interval)

    def sample() -> None:
        last_pss = 0.0
        while not done.is_set():
            if phase[0] == "after":  # the store connected again, searches refill its caches
                peaks["rss_after_mb"] = max(peaks["rss_after_mb"], rss_mb())
            if phase[0] == "during":
                peaks["rss_mb"] = max(peaks["rss_mb"], rss_mb())
                if time.monotonic() - last_pss >= PSS_EVERY:
                    last_pss = time.monotonic()
                    peaks["pss_with_children_mb"] = max(peaks["pss_with_children_mb"],
                                                        pss_with_children_mb())
            time.sleep(0.005)

    threads = [threading.Thread(target=search), threading.Thread(target=sample, daemon=True)]
    for thread in threads:
        thread.start()
    time.sleep(SETTLE_SECONDS)
    rss_before = rss_mb()
    phase[0] = "during"
    started = time.perf_counter()
    assert ws.compact(force=True), "the compaction did not run (another writer?)"
    seconds = time.perf_counter() - started
    expected = ["here"] if side == "here" else ["child: done"]
    assert ran == expected, f"the steps ran as {ran}, not as {expected}"
    phase[0] = "after"
    time.sleep(SETTLE_SECONDS)
    done.set()
    threads[0].join()
    out = {"side": side, "seconds": round(seconds, 1), "rss_before_mb": round(rss_before),
           **{key: round(value) for key, value in peaks.items()}}
    for name in ("before", "during", "after"):
        values = [ms for at, ms in latencies if at == name]
        out[name] = {"searches": len(values),
                     "p50_ms": round(pct(values, 0.5), 1) if values else None,
                     "p95_ms": round(pct(values, 0.95), 1) if values else None}
    return out


def run_fresh(side: str, workdir: Path, args: argparse.Namespace) -> dict:
    """One side in a fresh process on a fresh copy of the workdir."""
    with tempfile.TemporaryDirectory(prefix="retraining-searches-") as tmp:
        work = Path(tmp) / "copy"
        subprocess.run(["cp", "-a", str(workdir), str(work)], check=True)
        proc = subprocess.run(
            [sys.executable, __file__, "--side", side, "--copy", str(work),
             "--warm", str(args.warm), "--interval", str(args.interval)],
            capture_output=True, text=True, check=False)
        shutil.rmtree(work, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"the {side} side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_table(runs: list[dict]) -> None:
    print(f"{'side':<6}{'compaction s':>13}{'RSS before':>11}{'RSS peak':>9}"
          f"{'PSS+children':>13}{'RSS after':>10}"
          f"   searches p50 / p95 ms: before | during | after")
    for r in runs:
        phases = " | ".join(f"{r[p]['p50_ms']} / {r[p]['p95_ms']} ({r[p]['searches']})"
                            for p in ("before", "during", "after"))
        print(f"{r['side']:<6}{r['seconds']:>13}{r['rss_before_mb']:>11}{r['rss_mb']:>9}"
              f"{r['pss_with_children_mb']:>13}{r.get('rss_after_mb', 0):>10}   {phases}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path,
                        help="a server_latency.py workdir (ws/ and index/), left as it is")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of both sides (2)")
    parser.add_argument("--warm", type=int, default=40, help="searches before (40)")
    parser.add_argument("--interval", type=float, default=0.05,
                        help="seconds between searches (0.05)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # one side, in here
    parser.add_argument("--copy", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, args.copy, args.warm, args.interval)))
        return 0
    if args.workdir is None:
        parser.error("--workdir is required")
    problem = workdir_problem(args.workdir)
    if problem:
        parser.error(problem)
    runs = []
    for round_ in range(args.rounds):
        for side in SIDES if round_ % 2 == 0 else reversed(SIDES):
            runs.append(run_fresh(side, args.workdir, args))
            if not args.json:
                print_table(runs[-1:])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "retraining_searches.json").write_text(json.dumps(runs, indent=2))
    if args.json:
        print(json.dumps(runs, indent=2))
    else:
        print("\nall rounds:")
        print_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
