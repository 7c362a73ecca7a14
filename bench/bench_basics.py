"""What the benches share that imports nothing heavy: no rag_lsp, pyarrow, LanceDB or numpy.

A bench that measures a child process (``edit_memory.py``, ``engine_latency.py``,
``search_while_indexing.py``, ``server_memory.py``) imports nothing at module level but the
standard library and light helpers such as these, so that its child sets itself up as the
``rag-lsp`` command does (glibc's heaps, Arrow on the system allocator, LanceDB's read-ahead:
``rag_lsp.memory``) before any of those libraries loads or starts a thread. Set up after
them, a process holds what the server does not: ``edit_memory.py``'s child grew to 464-466 MB
over 40 rounds that way against ~390 set up first (bench/README.md, "A bench's own set-up,
not the server's").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between the two nearest)."""
    s, i = sorted(values), (len(values) - 1) * q
    return s[int(i)] + (s[min(int(i) + 1, len(s) - 1)] - s[int(i)]) * (i - int(i))


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder``, in every subfolder (a file deleted while it is
    counted counts nothing: a compaction may be cleaning up)."""
    total = 0
    for path in folder.rglob("*"):
        try:
            total += path.stat().st_size if path.is_file() else 0
        except FileNotFoundError:
            pass
    return total


def workdir_problem(workdir: Path) -> str | None:
    """What keeps ``workdir`` from being copied and opened by
    ``server_latency.open_copied_workdir``, or ``None``."""
    if (workdir / "ws").is_dir() and any(workdir.glob("index/*/manifest.json")):
        return None
    return (f"{workdir} has no ws/ and index/: make one with bench/server_latency.py "
            "--workdir DIR (--stand-in-vectors at 100k chunks)")


def checkouts(this_tree: Path, baseline: Path | None) -> dict[str, Path]:
    """The checkouts a bench measures by name: ``baseline`` (another checkout, e.g. a git
    worktree of an older commit) first when given, then this tree."""
    tree = {"this tree": this_tree}
    return {"baseline": baseline.resolve(), **tree} if baseline else tree


def pss_kb(pid: int | str = "self") -> int:
    """Proportional set size of a process, KB: its resident memory with each page it shares
    with others (the libraries a child maps too) split between them, so that processes add
    up to what the machine holds for them. 0 once the process has exited."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def child_pids() -> list[int]:
    """This process's children (any thread's)."""
    pids: list[int] = []
    for children in Path("/proc/self/task").glob("*/children"):
        try:
            pids += [int(pid) for pid in children.read_text().split()]
        except OSError:  # the thread has ended
            continue
    return pids


def pss_with_children_mb() -> float:
    """PSS of this process and its children, MB (~1 ms at 400 MB: sample it sparingly)."""
    return (pss_kb() + sum(pss_kb(pid) for pid in child_pids())) / 1024


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def emit(result: dict, args: argparse.Namespace, table: Callable[[dict], None]) -> None:
    """Date and command into ``result``; it is printed (``--json``: as JSON, else by
    ``table``) and written to ``args.out``."""
    result.update(date=time.strftime("%Y-%m-%d %H:%M"), command=" ".join(sys.argv))
    if args.json:
        print(json.dumps(result))
    else:
        table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    log(f"wrote {args.out}")
