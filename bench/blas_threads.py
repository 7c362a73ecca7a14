"""Search latency with NumPy's BLAS on every core (before) and on one thread (rag-lsp's default
since 2026-11-25, ``rag_lsp/blas_threads.py``), side by side in one run.

Three scenes, each run for both settings, alternating, ``--rounds`` times:

1. **server**: the real server (``python -m rag_lsp serve``) on ``server_latency.py``'s
   workspace (``--workdir``, built there first), ``rag/search`` round trips and the server's
   ``tookMs``: alone, then alternating with an in-process ``Workspace.search`` of the same
   query (an editor's server beside an agent's process: the case that was slowest);
2. **engine alone**: ``Workspace.search`` in a fresh process per setting;
3. **two engines at once**: two such processes searching at the same time.

Scenes 2 and 3 also run on ``--index-100k`` (``server_memory.py``'s 100k-chunk index) if given.
"Before" sets ``OPENBLAS_NUM_THREADS`` to the number of cores, which rag-lsp keeps as a
user's choice. "After" leaves it unset, so rag-lsp's own limit applies. Every process checks
its BLAS thread count (threadpoolctl) and fails if it is not the one asked for, except the
server, which gets the same environment and the same ``Workspace.open``. The in-process side
switches with threadpoolctl.

    .venv/bin/python bench/server_latency.py --workdir /tmp/bench/latency   # once, ~7 min
    .venv/bin/python bench/blas_threads.py --workdir /tmp/bench/latency \\
        --index-100k /tmp/bench/memory                                      # ~6 min
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from codebench.engine import wait_for_memory_copy
from server_latency import RESULTS, Session, emit, log, make_queries, stats
from threadpoolctl import threadpool_info, threadpool_limits

from rag_lsp import Workspace
from rag_lsp.blas_threads import USER_SETTINGS
from rag_lsp.config import Settings
from rag_lsp.workspace import load_embedder

HERE = Path(__file__).resolve().parent
CORES = os.cpu_count() or 2
SETTINGS = {"before (BLAS threads = cores)": CORES, "after (one BLAS thread)": 1}
# Engine processes load the model and the index first, then all search from this moment on.
START_AFTER_SECONDS = 25.0


def blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def check_threads(where: str, threads: int) -> None:
    if blas_threads() != {threads}:
        raise SystemExit(f"{where}: BLAS runs {blas_threads()} threads, not {threads}")


def blas_env(threads: int) -> dict[str, str]:
    """The environment of a process of this setting: "before" sets the count as a user
    would; "after" leaves it unset, for rag-lsp's own limit."""
    env = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS}
    if threads != 1:
        env["OPENBLAS_NUM_THREADS"] = str(threads)
    return env


def open_workspace(root: Path, index: Path) -> Workspace:
    ws = Workspace.open(root, Settings.from_dict({"indexPath": str(index)}),
                        embedder=load_embedder(Settings(), root)[0])
    ws.status()
    return ws


def wait_for_matrix(ws: Workspace, query: str) -> None:
    """Searches answer from LanceDB until the vector matrix has loaded in the background."""
    ws.search(query)  # opens the store, which starts the load
    wait_for_memory_copy(ws)


async def server_scene(root: Path, index: Path, threads: int, queries: list[str]) -> dict:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(blas_env(threads))  # the server process inherits it
    try:
        s = Session(root, index, "visual-studio-code")
        status = await s.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    ws = open_workspace(root, Path(status["folders"][0]["indexPath"]))
    out = {}
    with threadpool_limits(threads, user_api="blas"):
        check_threads("in-process", threads)
        for q in queries[:5]:
            await s.search(q)
        wait_for_matrix(ws, queries[0])
        await asyncio.sleep(3)  # the server's matrix loads in the background too
        for scene in ("alone", "beside in-process searches"):
            rt, took, eng = [], [], []
            for q in queries:
                started = time.perf_counter()
                answer = await s.search(q)
                rt.append((time.perf_counter() - started) * 1000)
                took.append(answer["tookMs"])
                if scene != "alone":
                    started = time.perf_counter()
                    ws.search(q)
                    eng.append((time.perf_counter() - started) * 1000)
            out[scene] = {"round_trip": stats(rt), "server_took": stats(took),
                          "in_process": stats(eng)}
    await s.client.shutdown_session()
    ws.close()
    return out


def engine_child(root: Path, index: Path, n: int, seed: int, threads: int,
                 start_at: float) -> None:
    """In a fresh process: ``n`` searches from ``start_at`` (wall clock, so that processes
    started together search together), their latencies as JSON on stdout."""
    ws = open_workspace(root, index)
    check_threads("engine process", threads)
    queries = make_queries(n + 5, seed)
    for q in queries[:5]:
        ws.search(q)
    wait_for_matrix(ws, queries[0])
    if time.time() > start_at:  # the other process may have started alone
        raise SystemExit(f"engine process: ready {time.time() - start_at:.1f} s after the "
                         f"common start; raise START_AFTER_SECONDS")
    time.sleep(start_at - time.time())
    ms = []
    for q in queries[5:]:
        started = time.perf_counter()
        ws.search(q)
        ms.append((time.perf_counter() - started) * 1000)
    print(json.dumps(ms))


def engines(root: Path, index: Path, threads: int, n: int, seed: int, count: int) -> dict:
    """``count`` engine processes searching at the same time (each its own queries)."""
    start_at = time.time() + START_AFTER_SECONDS
    procs = [subprocess.Popen([sys.executable, __file__, "--child", str(root), str(index),
                               str(n), str(seed + k), str(threads), str(start_at)],
                              env=blas_env(threads), stdout=subprocess.PIPE, text=True)
             for k in range(count)]
    ms = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"engine child failed ({p.returncode})")
        ms += json.loads(out.splitlines()[-1])
    return stats(ms)


def index_of(workdir: Path, chunks: str | None = None) -> tuple[Path, Path]:
    """(workspace root, index folder) of server_latency.py's or server_memory.py's workdir
    (the server keeps a folder's index in ``<index>/<folder name>-<hash>``)."""
    if chunks:
        return workdir / "ws", workdir / f"index-{chunks}"
    manifest = next((workdir / "index").glob("ws-*/manifest.json"), None)
    if manifest is None:
        raise SystemExit(f"no index in {workdir}/index: run bench/server_latency.py "
                         f"--workdir {workdir} first")
    return workdir / "ws", manifest.parent


def run(args: argparse.Namespace) -> dict:
    root, index = index_of(args.workdir)
    queries = make_queries(args.queries, args.seed)
    result: dict = {"cores": CORES, "rounds": args.rounds, "server": {}, "engine": {}}
    for r in range(args.rounds):
        for label, threads in SETTINGS.items():
            log(f"round {r + 1}: server, {label}")
            got = asyncio.run(server_scene(root, args.workdir / "index", threads, queries))
            result["server"].setdefault(label, []).append(got)
    sizes = [("~12k chunks", (root, index))]
    if args.index_100k:
        sizes.append(("100k chunks", index_of(args.index_100k, "100000")))
    for size, (size_root, size_index) in sizes:
        for r in range(args.rounds):
            for label, threads in SETTINGS.items():
                for count in (1, 2):
                    log(f"round {r + 1}: {size}, {count} engine process(es), {label}")
                    got = engines(size_root, size_index, threads, args.queries, args.seed,
                                  count)
                    result["engine"].setdefault(f"{size}, {count} process(es)", {}) \
                        .setdefault(label, []).append(got)
    return result


def print_table(result: dict) -> None:
    def row(label: str, runs: list[dict]) -> None:
        cells = "  ".join(f"{st['p50_ms']:6.1f} {st['p95_ms']:6.1f}" for st in runs)
        print(f"    {label:<40} {cells}")

    print(f"{result['cores']} CPUs; p50 and p95 ms per round")
    for label, runs in result["server"].items():
        print(f"  server, {label}")
        for scene in runs[0]:
            row(f"{scene}: round trip", [r[scene]["round_trip"] for r in runs])
            row(f"{scene}: tookMs", [r[scene]["server_took"] for r in runs])
            if runs[0][scene]["in_process"]["n"]:
                row(f"{scene}: in-process search", [r[scene]["in_process"] for r in runs])
    for scene, by_label in result["engine"].items():
        print(f"  engine, {scene}")
        for label, runs in by_label.items():
            row(label, runs)


def main() -> int:
    if len(sys.argv) == 8 and sys.argv[1] == "--child":
        root, index, n, seed, threads, start_at = sys.argv[2:]
        engine_child(Path(root), Path(index), int(n), int(seed), int(threads), float(start_at))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench/latency"),
                        help="server_latency.py's workdir (its workspace and index)")
    parser.add_argument("--index-100k", type=Path,
                        help="server_memory.py's workdir, for its 100k-chunk index")
    parser.add_argument("--queries", type=int, default=100, help="searches per scene (100)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per setting (2)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path, default=RESULTS / "blas_threads.json")
    args = parser.parse_args()
    emit(run(args), args, print_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
