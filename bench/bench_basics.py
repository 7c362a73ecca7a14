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

from pathlib import Path


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between the two nearest)."""
    s, i = sorted(values), (len(values) - 1) * q
    return s[int(i)] + (s[min(int(i) + 1, len(s) - 1)] - s[int(i)]) * (i - int(i))


def workdir_problem(workdir: Path) -> str | None:
    """What keeps ``workdir`` from being copied and opened by
    ``server_latency.open_copied_workdir``, or ``None``."""
    if (workdir / "ws").is_dir() and any(workdir.glob("index/*/manifest.json")):
        return None
    return (f"{workdir} has no ws/ and index/: make one with bench/server_latency.py "
            "--workdir DIR (--stand-in-vectors at 100k chunks)")
