"""How soon a search answers on a workspace that has never been indexed: `lexicalFirst` on
(the default) against off, alternating, each run a fresh process and a fresh index.

A run opens a generated workspace (``index_workspace.py``'s generator, 1,000 files by
default), starts its first index in a thread, and every second searches for the first
function name of each probe file not found yet (the first, middle and last file in path
order), counting a probe found when its file is in the top 10. (Searching much more often
would itself hold the index back: each search interrupts the model's batch.) Seconds are
measured from the process's spawn, so the imports and the model's load count. The run stops
waiting after ``--timeout`` seconds (the full index takes minutes) and cancels the index.

    .venv/bin/python bench/first_results.py                     # 1,000 files, 2 rounds
    .venv/bin/python bench/first_results.py --files 200 --rounds 1 --json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))


def probes(root: Path) -> list[tuple[str, str]]:
    """(path, first function name) of the first, middle and last generated file."""
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    chosen = [files[0], files[len(files) // 2], files[-1]]
    return [(path, re.search(r"^def (\w+)", (root / path).read_text(), re.M).group(1))
            for path in chosen]


def child(args: argparse.Namespace) -> None:
    """One run (in its own process): print a JSON line of seconds since ``args.spawned``."""
    import threading

    from rag_lsp.config import Settings
    from rag_lsp.errors import RagLspError
    from rag_lsp.workspace import Workspace

    def since() -> float:
        return round(time.time() - args.spawned, 2)

    settings = Settings.from_dict({"indexPath": str(args.index), "embeddingCache": False,
                                   "lexicalFirst": args.lexical_first})
    ws = Workspace.open(args.root, settings)
    figures: dict = {"opened": since()}
    stop = threading.Event()

    class Stop(Exception):
        pass

    def progress(event) -> None:
        if event.phase == "draft":
            figures["draft_started"] = since()
        elif "draft_started" in figures and "drafted" not in figures:
            figures["drafted"] = since()  # the first step after the draft: it is complete
        if stop.is_set():
            raise Stop

    def index() -> None:
        try:
            ws.index(progress=progress)
        except Stop:
            pass

    runner = threading.Thread(target=index, daemon=True)
    runner.start()
    waiting = dict(probes(args.root))
    found: dict[str, float] = {}
    deadline = time.time() + args.timeout
    while waiting and time.time() < deadline:
        for path, name in list(waiting.items()):
            try:
                results = ws.search(name).results
            except RagLspError:  # the index's tables are not made yet
                continue
            if path in [r.path for r in results]:
                found[path] = since()
                del waiting[path]
        time.sleep(args.every)
    stop.set()
    figures["found"] = [found.get(path) for path, _name in probes(args.root)]
    print(json.dumps(figures), flush=True)
    runner.join(120)
    os._exit(0)  # the model's threads need not wind down


def run_once(root: Path, lexical_first: bool, timeout: float, every: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="rag-lsp-first-") as index:
        spawned = time.time()
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--root", str(root), "--index", index,
             "--spawned", repr(spawned), "--timeout", str(timeout), "--every", str(every),
             "--lexical-first" if lexical_first else "--no-lexical-first"],
            capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000, help="files to generate (1000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setting (2)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a run waits for its probes (60)")
    parser.add_argument("--every", type=float, default=1.0,
                        help="seconds between a run's rounds of searches (1)")
    parser.add_argument("--workdir", type=Path, help="generate here (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--index", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--spawned", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--lexical-first", action=argparse.BooleanOptionalAction, default=True,
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0

    import index_workspace

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rag-lsp-first-ws-"))
    root = workdir / f"ws-{args.files}-{args.seed}"
    if not root.exists():
        index_workspace.generate(root, args.files, args.seed)
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    for round_ in range(args.rounds):
        for label in ("off", "on"):  # alternating: the machine's load falls on both
            figures = run_once(root, label == "on", args.timeout, args.every)
            runs[label].append(figures)
            print(f"round {round_ + 1} lexicalFirst {label}: {figures}", file=sys.stderr)
    if args.json:
        print(json.dumps({"files": args.files, "timeout": args.timeout, "runs": runs}))
        return 0

    def median(values: list) -> str:
        got = [v for v in values if v is not None]
        if len(got) < len(values):
            return f"> {args.timeout:.0f}"
        return f"{statistics.median(got):.1f}"

    print(f"{args.files} files, seconds from spawn, median of {args.rounds} runs "
          f"(> {args.timeout:.0f}: not found within the wait)")
    print("| lexicalFirst | workspace open | first file found | middle file | last file |")
    print("|---|---:|---:|---:|---:|")
    for label in ("off", "on"):
        rows = runs[label]
        found = [median([r["found"][i] for r in rows]) for i in range(3)]
        print(f"| {label} | {median([r['opened'] for r in rows])} | " + " | ".join(found) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
