"""What indexing leaves to a user who is typing: `indexThreads` = 0 (every core) vs the default.

Indexes the same generated workspace (bench/index_workspace.py's generator) into a fresh
index for each run, alternating the configurations, and reports for each run:

- wall seconds and cores used (process CPU seconds / wall seconds, from getrusage);
- search latency: a query embedding + search (a new query each time, so the query-vector
  cache never answers) issued every 200 ms during indexing, p50/p95;
- editor latency: another process doing a fixed ~10 ms of pure-Python work every 200 ms
  (a stand-in for the editor handling keystrokes), p50/p95 of its wall time.

    .venv/bin/python bench/index_cpu.py --files 10 --rounds 2

Searches every 200 ms slow indexing a lot (each one stops the batch under way, which then
runs again), so a few files are enough; ``--period 0`` measures indexing alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from index_workspace import BASE_WORDS, generate  # noqa: E402

from rag_lsp import Workspace  # noqa: E402
from rag_lsp.config import Settings  # noqa: E402
from rag_lsp.workspace import load_embedder  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

# A fixed amount of CPU work every PERIOD seconds until stdin closes; prints the wall time
# of each piece of work (ms), one JSON list.
EDITOR_PROBE = """
import json, sys, threading, time
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
def work():
    t = 0
    for i in range(N):
        t += i * i
    return t
N = 1
while True:  # calibrate: ~10 ms of work when the process has a core to itself
    t0 = time.perf_counter(); work(); took = time.perf_counter() - t0
    if took > 0.01: break
    N *= 2
N = int(N * 0.01 / took)
print("ready", flush=True)
times = []
while not stop.wait(0.2):
    t0 = time.perf_counter(); work(); times.append((time.perf_counter() - t0) * 1000)
print(json.dumps(times), flush=True)
"""


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_run(root: Path, settings: Settings, embedder, rng: random.Random, period: float
            ) -> dict:
    ws = Workspace(root, settings, embedder)
    editor = subprocess.Popen([sys.executable, "-c", EDITOR_PROBE], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert editor.stdout.readline().strip() == "ready"
    searches: list[float] = []
    failed = 0
    done = threading.Event()

    def search_while_indexing() -> None:
        nonlocal failed
        while period and not done.wait(period):
            query = " ".join(rng.sample(BASE_WORDS, 3)) + f" {rng.randrange(10**6)}"
            started = time.perf_counter()
            try:
                ws.search(query)
            except Exception:  # noqa: BLE001 - no table yet, early in the first batches
                failed += 1
                continue
            searches.append((time.perf_counter() - started) * 1000)

    searcher = threading.Thread(target=search_while_indexing)
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    searcher.start()
    try:
        report = ws.index(full=True)
        wall = time.perf_counter() - wall0
        cpu = cpu_seconds() - cpu0
    finally:
        done.set()
        searcher.join()
        out, _ = editor.communicate("")
    editor_ms = json.loads(out.strip().splitlines()[-1])
    ws.close()
    return {
        "index_threads": embedder.index_threads, "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2), "cores_used": round(cpu / wall, 2),
        "chunks": report.chunks_embedded, "searches": len(searches), "search_failed": failed,
        "search_p50_ms": round(percentile(searches, 0.5), 1),
        "search_p95_ms": round(percentile(searches, 0.95), 1),
        "editor_p50_ms": round(percentile(editor_ms, 0.5), 1),
        "editor_p95_ms": round(percentile(editor_ms, 0.95), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10, help="files to generate (10)")
    parser.add_argument("--period", type=float, default=0.2,
                        help="seconds between searches during indexing (0.2; 0: none)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each configuration")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS / "index_cpu.json")
    args = parser.parse_args()

    configs = {"all cores (indexThreads=0)": Settings(index_threads=0),
               "default (indexThreads=null)": Settings()}
    embedders = {name: load_embedder(s)[0] for name, s in configs.items()}
    for embedder in embedders.values():
        embedder.embed(["warm up"])
        embedder.embed_query("warm up")
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="index-cpu-") as tmp:
        root = Path(tmp) / "ws"
        generate(root, args.files, args.seed)
        print(f"{args.files} files, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        for round_ in range(args.rounds):
            names = list(configs) if round_ % 2 == 0 else list(reversed(configs))
            for name in names:
                index_dir = Path(tmp) / f"index-{round_}-{len(rows)}"
                settings = Settings(index_threads=configs[name].index_threads,
                                    index_path=str(index_dir),
                                    embedding_cache=False)  # each run embeds the same files
                row = {"config": name, "round": round_,
                       **one_run(root, settings, embedders[name], rng, args.period)}
                rows.append(row)
                print(json.dumps(row), flush=True)

    print("\nmedians over rounds")
    summary = {}
    for name in configs:
        mine = [r for r in rows if r["config"] == name]
        summary[name] = {key: round(statistics.median(r[key] for r in mine), 2)
                         for key in ("wall_s", "cores_used", "search_p50_ms", "search_p95_ms",
                                     "editor_p50_ms", "editor_p95_ms")}
        print(f"  {name}: {summary[name]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d %H:%M"), "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(), "command": " ".join(sys.argv),
        "rows": rows, "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
