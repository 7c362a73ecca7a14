"""The ANN index trained again, and the compaction after it, in a child process; and, from
10k chunks up to the size where the ANN index takes over, every compaction of the chunks table
(see :func:`rag_lsp.store.vector_index.compacts_in_a_child`).

Why: at 100k chunks these two steps each hold on the order of the vector column (150 MB) for a
few seconds to half a minute, and LanceDB 0.40 offers no setting that bounds it (bench/README.md,
"What a retraining holds"). In the server's process they took its RSS from ~350 to 468-480 MB,
past the 400 MB it is meant to stay under. And LanceDB runs them on its own worker threads,
which searches share and which the server cannot lower below its searches' priority (they
start when LanceDB is imported): searches beside a retraining took up to twice as long. A
child runs them at the background priority as a whole process, and hands their memory back
when it exits. On the stand-in 100k index (bench/retraining_searches.py): the searching
process 384-388 MB at the peak against 514-525, searches beside it p50 43-58 ms against
70-79 (p95 lower in four rounds of five; bench/README.md, "The retraining in a child
process").

The cost: a second Python with LanceDB and Arrow for the seconds to minutes a retraining takes,
which is rare (the table has doubled, or edits left the index in many segments): the machine
held ~30-40 MB more then (PSS); the steps took about as long. Meanwhile the model's bulk
session is set aside (``around_rewrite``), so the machine holds less than while indexing
embeds.

A compaction alone is short (~1-2 s at 24k chunks) and comes once one is due, every few
batches of a run: the bulk session stays, and for those seconds the machine holds ~110-120 MB
more (PSS) while the server holds ~45-60 MB less at its peak. That peak is the server's own,
which decides how close it comes to its memory target and which process the kernel ends
first when memory runs out (this child, see below).

The parent holds the writer lock throughout and writes nothing meanwhile; its handles read
with a consistency interval of 0, so they see the child's versions as soon as it commits
(and it connects again after each, so that its caches do not keep the versions before:
``ChunkStore._caches_following_versions``).
If the child cannot start or fails, the caller runs the same steps in its own process: a
failure LanceDB would raise there is then raised where it always was. If a signal ends it
(the system's out-of-memory killer, likely: the child asks the kernel to pick it first), the
server's process is not the place to try again; the store tries again in a child later. So
too when the child has not finished long after it should have (:func:`deadline_seconds`): the
parent ends it rather than hold the writer lock, and indexing, for good. Off
POSIX, and below the sizes (a small table trains and compacts in well under a second), the
steps run in the caller's process, as before.

Both ends are here. The child is ``python -m rag_lsp.store.retraining INDEX_DIR ROWS
KEEP_SECONDS NICENESS [compact]`` (``compact``: the compaction alone); it ends by itself when
its standard input closes (the parent exited).
"""

from __future__ import annotations

import enum
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from rag_lsp.priority import background_niceness, lower_this_child_process

log = logging.getLogger(__name__)

CHUNKS = "chunks"
# What of a child's standard error goes to the log (its last lines: a failure's exception).
_STDERR_TAIL_CHARS = 2000
ENDED_WITH_PARENT = 3  # the child's exit status when its standard input closed
WAIT_POLL_SECONDS = 0.25
OOM_SCORE_ADJ = 1000  # the highest: this child goes first (see _first_to_go_when_memory_runs_out)
# How long the parent waits before it ends a child that has not finished: the writer lock is
# held meanwhile, so a child stuck for good (a deadlock, a LanceDB bug) would stop indexing
# for good (one stuck in the kernel, on a disk that does not answer, cannot be ended). Far
# above what the steps take: 7-8 s at 100k chunks compacted, 16 s for the training alone on a
# day's uncompacted fragments (bench/README.md); 700 s at 100k chunks.
DEADLINE_MIN_SECONDS = 600.0
DEADLINE_SECONDS_PER_ROW = 0.001
_COMPACT_ONLY = "compact"  # the child's last argument when it compacts only


class Outcome(enum.Enum):
    DONE = "done"
    FAILED = "failed"  # the caller runs the steps itself
    KILLED = "killed"  # by a signal (the OOM killer's, likely): not worth running here
    TIMED_OUT = "timed out"  # ended past its deadline: not worth running here either


def deadline_seconds(rows: int) -> float:
    """How long a child working on ``rows`` rows may take before it is ended."""
    return DEADLINE_MIN_SECONDS + DEADLINE_SECONDS_PER_ROW * rows


def retrain_in_child(index_dir: Path, rows: int, keep_old_versions: timedelta,
                     while_waiting: Callable[[], None] = lambda: None) -> Outcome:
    """Train the chunks table's ANN index on its ``rows`` rows and compact the table after, in
    a child process at the background priority; wait for it, calling ``while_waiting`` every
    :data:`WAIT_POLL_SECONDS`. ``FAILED`` (logged, with why) when no child could start or it
    failed: the table is as it was, or trained and not compacted, and the caller runs the
    steps in its own process. ``KILLED`` (logged) when a signal ended it: likely the system
    out of memory, which the same steps in the server's process would bring on the server.
    ``TIMED_OUT`` (logged) when it ran past :func:`deadline_seconds` and was ended: whatever
    held it up would likely hold up the same steps here."""
    return _in_child(index_dir, rows, keep_old_versions, while_waiting, train=True)


def compact_in_child(index_dir: Path, rows: int, keep_old_versions: timedelta,
                     while_waiting: Callable[[], None] = lambda: None) -> Outcome:
    """Compact the chunks table of ``rows`` rows (and fold its new rows into its indexes, and
    drop its old versions, as ``optimize`` does) in a child process, as
    :func:`retrain_in_child` trains and compacts, with the same outcomes: ``FAILED``, the
    caller compacts in its own process; ``KILLED`` or ``TIMED_OUT``, not there."""
    return _in_child(index_dir, rows, keep_old_versions, while_waiting, train=False)


def _in_child(index_dir: Path, rows: int, keep_old_versions: timedelta,
              while_waiting: Callable[[], None], *, train: bool) -> Outcome:
    what = "train the ANN index of" if train else "compact"
    doing = "training the ANN index of" if train else "compacting"
    package_parent = str(Path(__file__).resolve().parents[2])
    errors = None
    try:
        errors = tempfile.TemporaryFile()
        # From the folder that holds this rag_lsp, so the child imports this very one (see
        # bulk_worker: `-m` puts the working folder first on the import path); hence an
        # absolute index folder.
        child = subprocess.Popen(
            [sys.executable, "-m", "rag_lsp.store.retraining", str(Path(index_dir).absolute()),
             str(rows), str(keep_old_versions.total_seconds()), str(background_niceness()),
             *(() if train else (_COMPACT_ONLY,))],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors,
            cwd=package_parent, start_new_session=True)  # (Ctrl-C is the parent's to act on)
    except OSError as exc:  # no temporary file either (a full /tmp), or no process
        if errors is not None:
            errors.close()
        log.warning("cannot start a process to %s %s (%s): doing it in this one", what,
                    index_dir, exc)
        return Outcome.FAILED
    deadline = time.monotonic() + deadline_seconds(rows)
    ended_here = False
    with errors:
        try:
            while time.monotonic() <= deadline:
                try:
                    child.wait(timeout=WAIT_POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    _call_while_waiting(while_waiting)
        finally:
            # A child still running (past its deadline, or we were interrupted) is ended
            # before its lifeline closes: it would otherwise end by itself, as after a failure
            # (ENDED_WITH_PARENT). One that ended by itself meanwhile keeps its exit status.
            if child.poll() is None:
                child.kill()
                child.wait()
                ended_here = True
            child.stdin.close()
        status = child.returncode
        errors.seek(0)
        said = errors.read().decode("utf-8", "replace")[-_STDERR_TAIL_CHARS:].strip()
    if ended_here:
        log.warning("the process %s %s had not finished after %.0f s: ended it; the index "
                    "is searched as it is, and the work is not done in this process%s", doing,
                    index_dir, deadline_seconds(rows), f" ({said})" if said else "")
        return Outcome.TIMED_OUT
    if status == 0:
        if said:  # LanceDB's warnings, say
            log.debug("the process %s %s said: %s", doing, index_dir, said)
        return Outcome.DONE
    if status < 0:
        log.warning("the process %s %s was ended by signal %s (out of memory?); the work is "
                    "not done in this process", doing, index_dir, -status)
        return Outcome.KILLED
    log.warning("%s %s in a child process failed (exit status %s%s); doing it in this "
                "process", doing[0].upper() + doing[1:], index_dir, status,
                f": {said}" if said else "")
    return Outcome.FAILED


def _call_while_waiting(while_waiting: Callable[[], None]) -> None:
    """``while_waiting()``, its failure logged: it must not end a child that is doing well."""
    try:
        while_waiting()
    except Exception:  # noqa: BLE001 - anything, the child's work goes on
        log.warning("while waiting for a child process's rewrite of the index", exc_info=True)


# ---- the child's end -------------------------------------------------------------------------


def _end_with_parent() -> None:
    """Exit as soon as standard input closes: the parent ended (or gave up on this child). A
    commit cut short leaves only files no version names: they stay on disk until a cleanup
    that deletes unverified files (LanceDB's compactions keep those for 7 days)."""
    # The descriptor itself: a daemon thread blocked in sys.stdin's buffer would hold its
    # lock at the interpreter's shutdown, which aborts the process.
    while os.read(0, 4096):
        pass
    os._exit(ENDED_WITH_PARENT)


def _first_to_go_when_memory_runs_out() -> None:
    """The kernel's out-of-memory killer picks the process with the highest score: by size
    alone it would pick the server (~400 MB) before this child (~250 MB at 100k chunks).
    Raising one's own score needs no privilege."""
    try:
        Path("/proc/self/oom_score_adj").write_text(str(OOM_SCORE_ADJ), encoding="ascii")
    except OSError:  # not Linux, or a sandbox that refuses
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    index_dir, rows, keep_seconds, niceness = args[:4]
    train = args[4:5] != [_COMPACT_ONLY]
    # The parent decides when this ends (it starts this in a session of its own as well, so a
    # terminal's Ctrl-C does not reach it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from rag_lsp import memory

    memory.set_up_process()  # the server's allocator settings, before LanceDB starts threads
    lower_this_child_process(int(niceness))  # before LanceDB's import starts its threads
    threading.Thread(target=_end_with_parent, daemon=True).start()
    _first_to_go_when_memory_runs_out()

    from rag_lsp.store.lance_caches import INDEX_CACHE_MIN_BYTES, connect, new_session
    from rag_lsp.store.vector_index import build_vector_index

    # Small caches: neither step reads through them much, and this process lives minutes.
    table = connect(Path(index_dir), new_session(INDEX_CACHE_MIN_BYTES)).open_table(CHUNKS)
    if train:
        build_vector_index(table, int(rows))
    table.optimize(cleanup_older_than=timedelta(seconds=float(keep_seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
