"""Freshness of a save that lands while the folder's writer is busy, through the server.

A folder has one writer: a save's update waits behind a compaction under way (asked for 20 s
after the last update, see ``rag_lsp/server/features/compaction.py``) or a re-index. At 100k
chunks every update makes a compaction due, and one that trains the ANN index again held
saves back for 27-38 s (bench/README.md, "A save behind a busy writer").

Each round, on each server, three saves (a function with a made-up name appended to a Python
file, then ``workspace/didChangeWatchedFiles``), each timed until a lexical ``rag/search``
(polled every 20 ms) returns the file ("found": by its drafted words too), and until it
returns the function's own chunk ("chunk": its update, or the run, has indexed it; how long
the writer kept it waiting):
1. *idle*: the writer has nothing to do; its update makes a compaction due;
2. *behind a compaction*: ``--compact-after`` s after that update, when the compaction has
   started (most are short; one that trains the ANN index again is not);
3. *during a re-index*: ``--rewrite-files`` files rewritten with new content, ``rag/reindex
   {}``, and the save once the folder reports "indexing".
Then a pause until the writer is idle again (``--settle``).

Side by side: ``--baseline CHECKOUT`` runs a second server from that checkout on a copy of
the same index; the rounds alternate between the two (which goes first alternates too).

    .venv/bin/python bench/busy_save_freshness.py --workdir /tmp/bench/lat100k --rounds 6 \
        --baseline /tmp/wt-base                                               # ~25 min

``--workdir`` is one that ``server_latency.py`` made (``ws/`` and ``index/``; at 100k chunks
with ``--stand-in-vectors``); each server works on a ``cp -a`` copy of it in ``--scratch``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_basics import workdir_problem
from index_workspace import RESULTS
from lsprotocol import types
from server_latency import (
    Session,
    add_function,
    adopt_copied_index,
    emit,
    log,
    rewrite,
    stats,
)

from rag_lsp.server.methods import RAG_REINDEX

POLL_SECONDS, FOUND_TIMEOUT = 0.02, 240.0
# The compactions the server asks for once saves settle (logged since 2026-11-28); a run's
# own are logged "... while indexing" (since 2026-12-06), and not counted here.
COMPACTED = re.compile(r"index compacted in (\d+) ms(?!.* while indexing)")
KINDS = {"idle": "idle save", "busy": "save behind a compaction", "run": "save during a re-index"}


class Side:
    """One server on its own copy of the workdir, and its figures."""

    def __init__(self, name: str, work: Path, pythonpath: str | None):
        self.name, self.work, self.pythonpath = name, work, pythonpath
        self.saves: dict[str, list[dict]] = {kind: [] for kind in KINDS}
        self.compactions: list[float] = []  # ms, as its log says
        self.session: Session | None = None
        self.indexed_at = 0.0  # (monotonic) when the last save's chunk was found

    async def start(self) -> None:
        root, index = self.work / "ws", self.work / "index"
        adopt_copied_index(root, index)
        env = dict(os.environ)
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        self.session = Session(root, index, "visual-studio-code", env=env)
        started = time.monotonic()
        await self.session.start()
        log(f"{self.name}: ready in {time.monotonic() - started:.0f} s")

    async def save(self, path: Path, token: str) -> dict:
        """Append ``token``'s function to ``path``, tell the server, and time until a search
        finds the file (by any means: its drafted words too) and until it finds the
        function's own chunk (the update, or the run, has indexed it)."""
        s = self.session
        rel = path.relative_to(s.root).as_posix()
        started = time.monotonic()
        add_function(path, token)
        s.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=path.as_uri(), type=types.FileChangeType.Changed)]))
        found = chunk = None
        while chunk is None and time.monotonic() - started < FOUND_TIMEOUT:
            hits = [r for r in (await s.search(token, mode="lexical"))["results"]
                    if r["path"] == rel]
            now = time.monotonic() - started
            if hits and found is None:
                found = now
            if any(r["symbol"] == token for hit in hits for r in [hit, *hit["ranges"]]):
                chunk = now
            await asyncio.sleep(POLL_SECONDS)
        self.indexed_at = started + (chunk or 0.0)
        return {"found_ms": None if found is None else round(found * 1000, 1),
                "chunk_ms": None if chunk is None else round(chunk * 1000, 1)}

    async def round(self, n: int, paths: list[Path], rewritten: list[Path],
                    args: argparse.Namespace) -> None:
        logs = len(self.session.client.log_messages)
        self.saves["idle"].append(await self.save(paths[0], f"zqidle{n}"))
        # The compaction is asked for once the update is written: wait until it runs.
        await asyncio.sleep(max(0.0, self.indexed_at + args.compact_after - time.monotonic()))
        self.saves["busy"].append(await self.save(paths[1], f"zqbusy{n}"))
        await asyncio.sleep(args.settle)
        rewrite(rewritten, args.seed + n)
        after = len(self.session.statuses)
        await self.session.client.protocol.send_request_async(RAG_REINDEX, {})
        await self.session.wait_for("indexing", after, timeout=60)
        self.saves["run"].append(await self.save(paths[2], f"zqrun{n}"))
        await self.session.wait_for("ready", after, timeout=3600)
        await asyncio.sleep(args.settle)
        self.compactions += [float(m.group(1)) for m in (
            COMPACTED.search(x.message) for x in self.session.client.log_messages[logs:]) if m]
        log(f"{self.name} round {n + 1}: " + ", ".join(
            f"{kind} found {saves[-1]['found_ms']} ms (its chunk {saves[-1]['chunk_ms']})"
            for kind, saves in self.saves.items()))

    def figures(self) -> dict:
        out = {"compactions_logged": stats(self.compactions)}
        for kind, saves in self.saves.items():
            for key in ("found_ms", "chunk_ms"):
                times = [s[key] for s in saves if s[key] is not None]
                out[f"{kind}_{key[:-3]}"] = stats(times, missed=len(saves) - len(times))
        return out


async def run(args: argparse.Namespace) -> dict:
    sides = [Side("this checkout", args.scratch / "this", None)]
    if args.baseline:
        sides.append(Side(f"baseline {args.baseline}", args.scratch / "baseline",
                          str(args.baseline)))
    for side in sides:
        shutil.rmtree(side.work, ignore_errors=True)
        log(f"copying {args.workdir} to {side.work}")
        subprocess.run(["cp", "-a", str(args.workdir), str(side.work)], check=True)
        await side.start()
    python = sorted((sides[0].work / "ws").rglob("*.py"))
    rng = random.Random(args.seed)
    picks = [rng.sample(range(len(python)), 3 + args.rewrite_files) for _ in range(args.rounds)]
    await asyncio.sleep(args.settle)  # first compactions, warm-ups
    for n in range(args.rounds):
        order = sides if n % 2 == 0 else sides[::-1]
        for side in order:
            files = sorted((side.work / "ws").rglob("*.py"))
            chosen = [files[i] for i in picks[n]]
            await side.round(n, chosen[:3], chosen[3:], args)
    result = {"rounds": args.rounds, "workdir": str(args.workdir), "cpu_count": os.cpu_count(),
              "python_files": len(python), "sides": {s.name: s.figures() for s in sides}}
    for side in sides:
        await side.session.client.shutdown_session()
    return result


def print_table(result: dict) -> None:
    print(f"{result['rounds']} rounds on {result['workdir']} ({result['python_files']} Python "
          f"files), {result['cpu_count']} CPUs; ms from the write")
    print(f"{'':<46} {'n':>3} {'p50':>8} {'p95':>8} {'max':>8} {'missed':>6}")
    for name, figures in result["sides"].items():
        print(name)
        for kind, label in KINDS.items():
            for what, shown in (("found", "found"), ("chunk", "its chunk found")):
                st = figures[f"{kind}_{what}"]
                print(f"  {label + ': ' + shown:<44} {st['n']:>3} {st.get('p50_ms', 0):>8.0f} "
                      f"{st.get('p95_ms', 0):>8.0f} {st.get('max_ms', 0):>8.0f} "
                      f"{st['missed']:>6}")
        st = figures["compactions_logged"]
        print(f"  {'compactions (as logged, ms)':<44} {st['n']:>3} {st.get('p50_ms', 0):>8.0f} "
              f"{st.get('p95_ms', 0):>8.0f} {st.get('max_ms', 0):>8.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="a server_latency.py workdir (ws/ and index/), copied per server")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per server (6)")
    parser.add_argument("--baseline", type=Path,
                        help="a checkout of rag-lsp to run a second server from, side by side")
    parser.add_argument("--scratch", type=Path,
                        help="where the copies go (default: a temp dir, removed after)")
    parser.add_argument("--compact-after", type=float, default=20.5,
                        help="seconds from an update to its compaction (the server asks at "
                             "20 s; 20.5)")
    parser.add_argument("--settle", type=float, default=45.0,
                        help="seconds of quiet after the compaction's save and after the "
                             "re-index, for the compactions they ask for to end (45)")
    parser.add_argument("--rewrite-files", type=int, default=20,
                        help="files rewritten before each round's re-index (20)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--out", type=Path, default=RESULTS / "busy_save_freshness.json")
    args = parser.parse_args()
    problem = workdir_problem(args.workdir)
    if problem:
        parser.error(problem)
    if args.baseline and not (args.baseline / "rag_lsp").is_dir():
        parser.error(f"--baseline {args.baseline}: not a rag-lsp checkout (no rag_lsp/)")
    tmp = None if args.scratch else tempfile.TemporaryDirectory(prefix="busy-save-")
    args.scratch = (args.scratch or Path(tmp.name)).resolve()
    args.scratch.mkdir(parents=True, exist_ok=True)
    args.workdir = args.workdir.resolve()
    try:
        result = asyncio.run(run(args))
    finally:
        if tmp is not None:
            tmp.cleanup()
    emit(result, args, print_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
