"""The language server's own share of a request: what a ``rag/search`` round trip costs beyond
the server's ``tookMs`` (reading the message, handing it between the server's threads,
converting its params and its answer, writing it), for this checkout beside another one
(``--baseline``), in one run.

Two servers of a small generated workspace (each with its own index), asked the same queries
in turn (which one goes first alternates), first idle, then beside a process that keeps one
core busy (as the model's child does while a run indexes). Each request's round trip is
taken by the benchmark's client, which keeps answers as parsed JSON (as an editor does); its
``tookMs`` by the server, from the handler's call of the search (after its params are
checked) to the answer built, the hand-over to the search thread and back included.
"outside" is the difference: the rest of the server's protocol, the pipes and the client.
The table shows p50 / p95; the JSON (``--out``) has p99 and the maximum too.

    .venv/bin/python bench/protocol_overhead.py --baseline /tmp/base   # ~3 min

``--baseline`` is a checkout of rag-lsp (a ``git worktree``, its ``models/`` linked to this
one's), run with its own code and this virtualenv. Without it both servers are this
checkout's (how much two of one code differ).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_basics import emit, log
from index_workspace import RESULTS, generate
from server_latency import Session, make_queries, stats

BUSY_CORE = "while True:\n    pass\n"


class Side:
    """One server and the figures of its searches, by phase."""

    def __init__(self, name: str, code: Path, root: Path, index: Path):
        env = dict(os.environ)
        env["PYTHONPATH"] = str(code)
        self.name, self.code = name, code
        self.session = Session(root, index, "visual-studio-code", env=env)
        self.figures: dict[str, dict[str, list[float]]] = {}

    async def search(self, phase: str, query: str) -> None:
        started = time.perf_counter()
        answer = await self.session.search(query)
        round_trip = (time.perf_counter() - started) * 1000
        got = self.figures.setdefault(phase, {"round_trip": [], "took": [], "outside": []})
        got["round_trip"].append(round_trip)
        got["took"].append(answer["tookMs"])
        got["outside"].append(round_trip - answer["tookMs"])


async def phase(sides: list[Side], name: str, queries: list[str], spacing: float) -> None:
    for n, query in enumerate(queries):
        for side in (sides if n % 2 == 0 else sides[::-1]):
            await side.search(name, query)
            await asyncio.sleep(spacing)


async def measure(args: argparse.Namespace, work: Path) -> dict:
    root = work / "ws"
    generate(root, args.files, args.seed)
    here = Path(__file__).resolve().parent.parent
    # (absolute: each server runs from the workspace's folder)
    sides = [Side("this", here, root, work / "index-this"),
             Side("baseline", (args.baseline or here).resolve(), root,
                  work / "index-baseline")]
    started_sides = []
    # True until the phases are done. Until then a failed shutdown is logged, not raised, so
    # that it does not hide the error that stopped the bench.
    failed = True
    try:
        for side in sides:
            started = time.monotonic()
            started_sides.append(side)
            status = await side.session.start()
            log(f"{side.name} ({side.code}): {status['folders'][0].get('chunks')} chunks, "
                f"ready in {time.monotonic() - started:.0f} s")
        for side in sides:  # warm: the in-memory copy loads in the background of the first
            for query in make_queries(20, args.seed + 1):
                await side.session.search(query)
        await asyncio.sleep(3)
        await phase(sides, "idle", make_queries(args.queries, args.seed + 2), args.spacing)
        busy = subprocess.Popen([sys.executable, "-c", BUSY_CORE])
        try:
            await asyncio.sleep(1)
            await phase(sides, "beside a busy core", make_queries(args.queries, args.seed + 3),
                        args.spacing)
        finally:
            busy.kill()
            busy.wait()
        failed = False
    finally:
        shutdown_error: Exception | None = None
        for side in started_sides:  # each one, even after another's failed
            try:
                await side.session.client.shutdown_session()
            except Exception as exc:
                # (a server that failed to start, or died, may not answer its shutdown)
                log(f"{side.name}: its server did not shut down ({exc!r})")
                shutdown_error = shutdown_error or exc
        if shutdown_error is not None and not failed:
            raise shutdown_error
    return {"files": args.files, "queries": args.queries, "spacing_s": args.spacing,
            "code": {side.name: str(side.code) for side in sides},
            "cpu_count": os.cpu_count(),
            "servers": {side.name: {ph: {key: stats(values) for key, values in got.items()}
                                    for ph, got in side.figures.items()} for side in sides}}


def table(result: dict) -> None:
    print(f"rag/search through the server, ms p50 / p95 ({result['queries']} queries a phase, "
          f"{result['files']} files)")
    print(f"{'phase':<20} {'server':<9} {'round trip':>14} {'tookMs':>14} {'outside':>14}")
    for name, phases in result["servers"].items():
        for ph, figures in phases.items():
            cells = [f"{figures[k]['p50_ms']:.1f} / {figures[k]['p95_ms']:.1f}"
                     for k in ("round_trip", "took", "outside")]
            print(f"{ph:<20} {name:<9} " + " ".join(f"{c:>14}" for c in cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path,
                    help="a rag-lsp checkout to run beside this one (default: this one)")
    ap.add_argument("--files", type=int, default=40, help="files to generate (40)")
    ap.add_argument("--queries", type=int, default=200, help="queries a phase, each to both "
                    "servers (200)")
    ap.add_argument("--spacing", type=float, default=0.02,
                    help="seconds between two requests (0.02)")
    ap.add_argument("--seed", type=int, default=7,
                    help="seed of the generated files and the queries (7)")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object instead of the table (--out is written either "
                    "way)")
    ap.add_argument("--out", type=Path, default=RESULTS / "protocol_overhead.json",
                    help="where the figures go (bench/results/protocol_overhead.json)")
    args = ap.parse_args()
    if args.baseline and not (args.baseline / "rag_lsp" / "server").is_dir():
        ap.error(f"--baseline {args.baseline} is not a rag-lsp checkout (no rag_lsp/server)")
    with tempfile.TemporaryDirectory(prefix="rag-lsp-protocol-") as tmp:
        emit(asyncio.run(measure(args, Path(tmp))), args, table)


if __name__ == "__main__":
    main()
