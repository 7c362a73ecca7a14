"""Does an indexing run get out of a search's way? One process, one workspace, alternating runs
with the indexer's pauses on (the default) and off (the code before: only the model's batches
waited for searches, not the reading, chunking and term derivation between them).

Each run rewrites ``--rewrite`` files of a generated workspace (bench/index_workspace.py's
generator) with new content and re-indexes them in a thread, while the main thread, every
``--period`` seconds, either

- searches (a new query each time, so the query-vector cache never answers): the figure an
  editor sees, or
- marks itself as searching and sleeps 2 ms three times: how late the interpreter hands it
  back (the wait any hand-over between a server's threads pays while indexing runs).

    .venv/bin/python bench/index_yield.py --workdir /tmp/bench/yield --rounds 3
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from index_workspace import generate  # noqa: E402
from server_latency import emit, log, make_queries, rewrite  # noqa: E402

from rag_lsp.config import Settings  # noqa: E402
from rag_lsp.indexing.indexer import Indexer  # noqa: E402
from rag_lsp.workspace import Workspace, load_embedder  # noqa: E402

SLEEP = 0.002
ORIGINAL_INIT = Indexer.__init__


def one_run(ws: Workspace, paths: list[Path], args: argparse.Namespace, rng: random.Random,
            queries: list[str], pauses: bool) -> dict:
    rewrite(rng.sample(paths, k=args.rewrite), rng.randrange(1 << 30))
    if not pauses:  # as before: the indexer's own pauses do nothing, the model's still wait
        def without_pauses(self, *args, **kwargs) -> None:
            ORIGINAL_INIT(self, *args, **{**kwargs, "pause": lambda: None})

        Indexer.__init__ = without_pauses
    done = threading.Event()
    started = time.perf_counter()

    def index() -> None:
        try:
            ws.index()
        finally:  # a failed run ends the probing too (and the error shows)
            done.set()
            Indexer.__init__ = ORIGINAL_INIT

    worker = threading.Thread(target=index)
    worker.start()
    searches, late = [], []
    probe = False
    while not done.is_set():
        probe = not probe  # a search, then a probe of the interpreter, and so on
        if not probe and queries:
            t0 = time.perf_counter()
            ws.search(queries.pop())
            searches.append((time.perf_counter() - t0) * 1000)
        else:
            with ws.priority.searching():
                for _ in range(3):
                    t0 = time.perf_counter()
                    time.sleep(SLEEP)
                    late.append((time.perf_counter() - t0 - SLEEP) * 1000)
        time.sleep(args.period)
    worker.join()
    return {"seconds": time.perf_counter() - started, "search_ms": searches, "late_ms": late}


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench/yield"))
    parser.add_argument("--files", type=int, default=200, help="files to generate (200)")
    parser.add_argument("--rewrite", type=int, default=40, help="files rewritten per run (40)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per variant (3)")
    parser.add_argument("--period", type=float, default=0.1, help="seconds between probes")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "index_yield.json")
    args = parser.parse_args()
    root, index = args.workdir / "ws", args.workdir / "index"
    if not root.is_dir():
        generate(root, args.files, 7)
    settings = Settings.from_dict({"indexPath": str(index)})
    ws = Workspace.open(root, settings, embedder=load_embedder(settings, root)[0])
    log("first index (untimed)")
    ws.index()
    paths = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".md"))
    rng = random.Random(time.time_ns())
    queries = make_queries(2000, rng.randrange(1 << 30))
    runs: dict[str, list[dict]] = {"pauses off (before)": [], "pauses on": []}
    for round_ in range(args.rounds):
        for name in (list(runs) if round_ % 2 == 0 else list(reversed(runs))):
            log(f"round {round_ + 1}: {name}")
            runs[name].append(one_run(ws, paths, args, rng, queries, name == "pauses on"))
    result = {}
    for name, got in runs.items():
        searches = [v for r in got for v in r["search_ms"]]
        late = [v for r in got for v in r["late_ms"]]
        result[name] = {
            "runs": len(got), "run_seconds": [round(r["seconds"], 1) for r in got],
            "search": {"n": len(searches), **{f"p{q}_ms": round(pct(searches, q), 1)
                                              for q in (50, 95, 99)}},
            "late": {"n": len(late), **{f"p{q}_ms": round(pct(late, q), 2)
                                        for q in (50, 95, 99)}},
        }

    def table(r: dict) -> None:
        print(f"{'':22}{'search p50/p95/p99 ms':>26}{'interpreter late p50/p95/p99 ms':>34}"
              f"{'run s':>18}")
        for name in runs:
            v = r[name]
            s, la = v["search"], v["late"]
            print(f"{name:22}{s['p50_ms']:>10} {s['p95_ms']:>7} {s['p99_ms']:>7}"
                  f"{la['p50_ms']:>16} {la['p95_ms']:>7} {la['p99_ms']:>7}"
                  f"{' / '.join(map(str, v['run_seconds'])):>20}")

    emit(result, args, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
