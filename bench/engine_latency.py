"""Search latency of the engine (``Workspace.search``, in process), this checkout beside
another one, on one index.

Each measurement is a fresh process: it opens the index as a server does, warms up (30
searches, then waits for the in-memory copies that load in the background, then 20 more),
and times ``--queries`` new queries back to back (query embedding, retrieval and ranking
included; nothing cached). With ``--baseline DIR`` (a git worktree of an older commit) the
two checkouts take turns, the order swapped each round, so both columns share the machine's
state. Indexes: ``server_memory.py``'s synthetic 10k and 100k-chunk ones (``--chunks``), or
any real index with ``--index`` and ``--root`` (e.g. the one ``server_latency.py`` builds).

    .venv/bin/python bench/engine_latency.py --chunks 10000 100000 --baseline /tmp/wt-before
    .venv/bin/python bench/engine_latency.py --root /tmp/bench/latency/ws \\
        --index /tmp/bench/latency/index/ws-* --baseline /tmp/wt-before --rounds 4
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_basics import pct  # this script's folder is on the import path

HERE = Path(__file__).resolve().parent
WARM_UP, SETTLE_SECONDS, AFTER_SETTLE = 30, 6.0, 20


def child(index_dir: Path, root: Path, queries: int, seed: int) -> None:
    # What the `rag-lsp` command does first.
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)
    from server_latency import make_queries

    import rag_lsp
    from rag_lsp.config import Settings
    from rag_lsp.workspace import Workspace

    ws = Workspace.open(root, Settings.from_dict({"indexPath": str(index_dir)}))
    # As the language server does once its folders are open: what is loaded for good leaves
    # the collector's full collections (else one lands in ~1 search in several hundred, ~60 ms).
    rag_lsp.memory.freeze_long_lived_objects()
    for query in make_queries(WARM_UP, seed + 1000):
        ws.search(query)
    time.sleep(SETTLE_SECONDS)  # the vectors, postings and columns load in the background
    for query in make_queries(AFTER_SETTLE, seed + 2000):
        ws.search(query)
    took = []
    for query in make_queries(queries, seed):
        started = time.perf_counter()
        ws.search(query)
        took.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"code": str(Path(rag_lsp.__file__).parent.parent), "ms": took}))


def run_in_checkout(argv: list[str], code: Path, cwd: Path, timeout: float | None, *,
                    progress: bool = False) -> dict:
    """``python -P argv...`` in a fresh process importing checkout ``code`` (this folder's
    benches beside it); the JSON object it prints last. With ``progress`` its stderr (a
    bench's log lines) shows as it runs, else only when it fails."""
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{HERE}"}
    # -P: the checkout in PYTHONPATH, not the folder of this script's checkout, comes first.
    # A session of its own: stopped (a timeout, Ctrl-C, kill), it is stopped with every
    # process it started, such as a language server and its model's child.
    proc = subprocess.Popen([sys.executable, "-P", *argv], cwd=cwd, env=env,
                            stdout=subprocess.PIPE,
                            stderr=None if progress else subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException:
        stop_process_group(proc)
        raise
    if proc.returncode != 0:
        said = "" if progress else f":\n{stderr[-3000:]}"
        raise SystemExit(f"the measured process ({code}) failed with exit code "
                         f"{proc.returncode}{said}")
    lines = stdout.strip().splitlines()
    if not lines:
        raise SystemExit(f"the measured process ({code}) printed no figures")
    return json.loads(lines[-1])


def stop_process_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop ``proc`` and every process of its group: asked first, killed after ``grace``
    seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            os.killpg(proc.pid, signal.SIGKILL)  # what it started and left behind
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def run_child(script: str, code: Path, child_args: list[str], cwd: Path,
              timeout: float) -> dict:
    """``script --child child_args...`` in a fresh process running checkout ``code``; the
    JSON object it prints last, which names the checkout it ran (checked)."""
    answer = run_in_checkout([script, "--child", *child_args], code, cwd, timeout)
    if Path(answer["code"]).resolve() != code.resolve():
        raise SystemExit(f"measured {answer['code']}, not {code}")
    return answer


def measure(code: Path, index_dir: Path, root: Path, queries: int, seed: int) -> list[float]:
    return run_child(str(Path(__file__).resolve()), code,
                     [str(index_dir), str(root), str(queries), str(seed)], root, 1800)["ms"]


def figures(runs: list[list[float]]) -> dict:
    every = [t for run in runs for t in run]
    return {"p50": round(statistics.median(every), 1), "p95": round(pct(every, 0.95), 1),
            "p99": round(pct(every, 0.99), 1), "searches": len(every),
            "p95_per_run": [round(pct(run, 0.95), 1) for run in runs]}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000],
                        help="server_memory.py's synthetic indexes (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench/memory"),
                        help="where those are built and kept (default: %(default)s)")
    parser.add_argument("--index", type=Path, help="a real index folder instead")
    parser.add_argument("--root", type=Path, help="the workspace folder of --index")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure beside")
    parser.add_argument("--rounds", type=int, default=2, help="processes per checkout")
    parser.add_argument("--queries", type=int, default=150, help="timed searches a process")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if (args.index is None) != (args.root is None):
        parser.error("--index and --root go together")
    codes = {"this tree": HERE.parent}
    if args.baseline:
        codes = {"baseline": args.baseline.resolve(), **codes}
    if args.index:
        indexes = {args.index.name: (args.index, args.root)}
    else:
        sys.path.insert(0, str(HERE))
        from server_memory import ensure_index
        indexes = {f"{n} chunks": ensure_index(args.workdir, n) for n in args.chunks}
    results: dict = {}
    for label, (index_dir, root) in indexes.items():
        runs: dict[str, list[list[float]]] = {name: [] for name in codes}
        for round_ in range(args.rounds):
            for name in (codes if round_ % 2 == 0 else reversed(list(codes))):
                runs[name].append(measure(codes[name], index_dir, root, args.queries,
                                          seed=100 + round_))
                print(f"[{time.strftime('%H:%M:%S')}] {label}, {name}, round {round_ + 1}: "
                      f"p95 {pct(runs[name][-1], 0.95):.1f} ms", file=sys.stderr, flush=True)
        results[label] = {name: figures(r) for name, r in runs.items()}
        print(f"\n{label}: Workspace.search ms, {args.rounds} processes x {args.queries} "
              "searches each")
        for name, f in results[label].items():
            print(f"  {name:<10} p50 {f['p50']:6.1f}  p95 {f['p95']:6.1f}  p99 {f['p99']:6.1f}"
                  f"   p95 per process {f['p95_per_run']}")
    if args.json:
        print(json.dumps(results, indent=2))
    sys.path.insert(0, str(HERE))
    from codebench.engine import write_results
    write_results("engine_latency", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
