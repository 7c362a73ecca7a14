"""Giving memory back to the system after large, short-lived work."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import time

# glibc gives each thread that allocates its own heap ("arena"), up to 8 per core, and a
# heap's freed memory mostly stays resident. A search touches LanceDB's threads, the
# full-text pool, onnxruntime's and the server's own; two arenas held 100k chunks in 154 MB
# less than the default (bench/server_memory.py, 679 -> 525 MB), for ~0.5 ms per search.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt() parameter number, from glibc's malloc.h
# glibc serves a request of its mmap threshold or more from a mapping of its own, handed back
# to the system when freed. The threshold starts at 128 KiB but rises to the size of every
# mapped block freed (up to 32 MiB): after the first big buffer is let go, the ones that follow
# (a write's merge, a patch of the in-memory copy, Arrow's batches) come from the heaps, where
# what they leave is fragmented and stays resident. A fixed threshold stops that rise: three
# index runs of 10 edited files, in a process holding the in-memory copy of 23.7k chunks,
# ended at 408, 477 and 510 MB with the rising threshold and at 373, 375 and 379 MB with
# 1 MiB; the language server peaked at 434 MB instead of 486-543 during a re-index at 12k
# chunks, and an edit became searchable ~35 ms later: mapped pages are new pages (bench/README.md,
# "Large buffers handed back when freed"). 1 MiB rather than less: 256 KiB held no less in
# the server (430-433 MB at that peak), and smaller buffers (a search's arrays, most of
# Arrow's) keep reusing the heaps' pages instead of faulting in new ones each time.
MMAP_THRESHOLD_BYTES = 1024 * 1024
_M_MMAP_THRESHOLD = -3
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
# LanceDB reads ahead of a scan into a buffer of up to 2 GiB (Lance's default, sized for
# object stores far away). A compaction reads every row it rewrites, faster than it writes
# them, so the buffer fills: compacting the 100k-chunk table after the ANN index is trained
# again peaked at 724 MB with the default and 635 MB with 32 MiB, the training at 628 and
# 569 (bench/reindex_memory.py --runs 2; bench/README.md, "A cap on LanceDB's read-ahead").
# A local disk keeps up with far less: a scan of 100k vectors took ~0.3 s either way (+15%),
# of their text no longer. 32 MiB rather than 8 (615 MB): the budget holds the largest
# single read with room to spare (Lance lets a read larger than what is left of the budget
# through only when no read before it in the scan's order is in flight).
LANCE_READ_AHEAD_VARIABLE = "LANCE_DEFAULT_IO_BUFFER_SIZE"
LANCE_READ_AHEAD_BYTES = 32 * 1024 * 1024
# Rows a Lance scan that names no batch size decodes at a time (Lance's default: 8,192). A
# compaction's scan is one: with 2,048, one of 100k chunks peaked ~20 MB lower, and 1,000 files
# indexed from scratch 8 to 23 MB lower (bench/README.md, "Compactions read 2,048 rows at a
# time"). LanceDB's queries name their own size (1,024 rows, or what to_batches asks), which the
# variable leaves alone.
LANCE_BATCH_ROWS_VARIABLE = "LANCE_DEFAULT_BATCH_SIZE"
LANCE_BATCH_ROWS = 2048


def return_freed_memory() -> None:
    """Hand freed heap back to the system. glibc (and Arrow's own allocator) keep it for
    reuse, so the buffers a big read went through, or a model session let go, stay resident
    otherwise: 180 MB after loading 100k vectors (bench/server_memory.py). The glibc part is
    a no-op off Linux or on another C library."""
    pyarrow = sys.modules.get("pyarrow")  # (never imported here: the embedding child has none)
    if pyarrow is not None:  # Arrow's allocator (mimalloc) keeps what a large read freed
        pyarrow.default_memory_pool().release_unused()
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _set_malloc_option(option: int, value: int, variable: str, tunable: str) -> None:
    """``mallopt(option, value)``, unless the user set the environment ``variable`` or the
    ``GLIBC_TUNABLES`` entry ``tunable`` (glibc applied theirs at start). A no-op off Linux
    or on another C library."""
    if (not sys.platform.startswith("linux") or variable in os.environ
            or f"{tunable}=" in os.environ.get("GLIBC_TUNABLES", "")):
        return
    try:
        ctypes.CDLL("libc.so.6").mallopt(option, value)
    except (OSError, AttributeError):
        pass


def limit_malloc_arenas() -> None:
    """Cap glibc's heaps at :data:`MALLOC_ARENAS` for the threads started from now on, unless
    the user set ``MALLOC_ARENA_MAX`` or ``GLIBC_TUNABLES=glibc.malloc.arena_max=…``. Called
    first thing by the ``rag-lsp`` command, before any library starts a thread."""
    _set_malloc_option(_M_ARENA_MAX, MALLOC_ARENAS, "MALLOC_ARENA_MAX",
                       "glibc.malloc.arena_max")


def map_large_allocations() -> None:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD_BYTES`, so that every large
    buffer goes back to the system when freed, unless the user set
    ``MALLOC_MMAP_THRESHOLD_`` or ``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=…``. Called
    first thing by the ``rag-lsp`` command."""
    _set_malloc_option(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES, "MALLOC_MMAP_THRESHOLD_",
                       "glibc.malloc.mmap_threshold")


def arrow_on_system_allocator() -> None:
    """Let Arrow take its buffers from glibc's heaps instead of its own allocator (mimalloc),
    unless the user chose one with ``ARROW_DEFAULT_MEMORY_POOL``. mimalloc keeps much of what
    it frees in segments of its own; glibc's heaps are capped (:func:`limit_malloc_arenas`)
    and handed back once the process is quiet (:func:`after_work`). Arrow reads the variable
    once, when pyarrow first allocates, so this runs before pyarrow is imported (the
    ``rag-lsp`` command calls it first thing); afterwards it changes nothing."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault(ARROW_POOL_VARIABLE, "system")


def cap_lance_read_ahead() -> None:
    """Cap LanceDB's read-ahead at :data:`LANCE_READ_AHEAD_BYTES`, unless the user set
    ``LANCE_DEFAULT_IO_BUFFER_SIZE``. Lance reads the variable once, at its first scan, so
    this runs before any table is read (the ``rag-lsp`` command calls it first thing)."""
    os.environ.setdefault(LANCE_READ_AHEAD_VARIABLE, str(LANCE_READ_AHEAD_BYTES))


def cap_lance_scan_batches() -> None:
    """Lance's scans that name no batch size (a compaction's) decode at most
    :data:`LANCE_BATCH_ROWS` rows at a time, unless the user set ``LANCE_DEFAULT_BATCH_SIZE``."""
    os.environ.setdefault(LANCE_BATCH_ROWS_VARIABLE, str(LANCE_BATCH_ROWS))


def set_up_process() -> None:
    """Everything above, in the order it must run: first thing in the ``rag-lsp`` command
    (and in benches that stand in for it), before any library starts a thread, allocates or
    reads a table."""
    limit_malloc_arenas()  # before any library starts its threads
    map_large_allocations()  # before the first large buffer is freed
    arrow_on_system_allocator()  # before pyarrow is imported
    cap_lance_read_ahead()  # before LanceDB's first scan
    cap_lance_scan_batches()


def freeze_long_lived_objects() -> None:
    """Keep what a long-running process holds for good (imports, the model, open indexes:
    ~180k objects) out of the cyclic garbage collector's full collections. Walking them took
    ~75 ms on a 2-core machine, and a full collection comes every few hundred searches, inside
    whichever request is running: a 20 ms search took 95 ms (bench/server_latency.py). After
    ``gc.freeze()`` a full collection takes ~1.5 ms. Reference counting still frees frozen
    objects; a cycle among them would stay, so call this again after replacing long-lived
    state (it unfreezes, collects what the old state left, and freezes what is alive). The
    language server calls it when settings (re)open its folders, the MCP server after its
    first index run; a folder added or re-opened otherwise stays in the collector's view,
    which costs only its share of a collection."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


# A process that searches or indexes frees most of what each piece of work allocated, but
# glibc and Arrow keep it resident: a process serving 10k chunks held 431 MB after 100
# searches and 396 MB once quiet and trimmed (bench/server_memory.py, median of 2; single
# runs of a script gave 436 -> 317 and 431 -> 395). Handing it back takes 0.4–2 ms and
# left the next searches as fast; it is done once the process has been quiet this long
# after some work, so it never runs between the searches of someone typing.
IDLE_TRIM_SECONDS = 5.0


class _TrimWhenIdle:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._last_work = 0.0
        self._pending = False
        self._thread: threading.Thread | None = None

    def worked(self) -> None:
        with self._lock:
            self._last_work = time.monotonic()
            if self._pending:
                # The thread is waiting for a moment of quiet, and checks the clock again when
                # its wait ends. Not woken after each search: a wake-up came in every search's
                # last steps (0.4 ms each while an index run kept the cores busy, py-spy).
                return
            self._pending = True
            if self._thread is None:
                # A daemon: it only ever waits, or makes two short native calls.
                self._thread = threading.Thread(target=self._run, name="rag-trim", daemon=True)
                self._thread.start()
            self._lock.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._lock.wait()
                quiet_for = time.monotonic() - self._last_work
                if quiet_for < IDLE_TRIM_SECONDS:
                    self._lock.wait(IDLE_TRIM_SECONDS - quiet_for)
                    continue
                self._pending = False
            return_freed_memory()


_trim_when_idle = _TrimWhenIdle()


def after_work() -> None:
    """Note that a search or a write just ended: once the process has been quiet for
    :data:`IDLE_TRIM_SECONDS`, freed memory is handed back (see :func:`return_freed_memory`)."""
    _trim_when_idle.worked()
