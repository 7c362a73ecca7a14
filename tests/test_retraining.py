"""The ANN index trained again, and the compaction after it, in a child process; and past a
size every compaction (rag_lsp.store.retraining): what the child does, and what the store does
when it cannot.

Real LanceDB and a real child process; the size threshold is lowered so that 2,000 rows make a
"large" index (see test_vector_index.py, whose store this is).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pytest

from rag_lsp import priority
from rag_lsp.store import lance_store, retraining, vector_index
from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.store.retraining import ENDED_WITH_PARENT, Outcome, compact_in_child, retrain_in_child
from rag_lsp.store.vector_index import build_vector_index, compacts_in_a_child, trained_rows
from tests.test_vector_index import ROWS, filled_store, rows_for

PACKAGE_PARENT = Path(retraining.__file__).resolve().parents[2]
KEEP = timedelta(seconds=60)
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="per-thread nice values and /proc are Linux's")


@pytest.fixture
def large_store(tmp_path, monkeypatch):
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS // 2)
    store, vectors = filled_store(tmp_path / "ix", np.random.default_rng(3))
    return store, vectors


def on_each_child(monkeypatch, act) -> None:
    """``act(child)`` on each child process retraining.py starts, as soon as it is started."""
    real_popen = subprocess.Popen

    def started(*args, **kwargs):
        child = real_popen(*args, **kwargs)
        act(child)
        return child

    monkeypatch.setattr(retraining.subprocess, "Popen", started)


def fragments(store) -> int:
    return store._chunks.stats()["fragment_stats"]["num_fragments"]  # noqa: SLF001


def test_the_child_trains_and_compacts_and_the_store_reads_its_version(large_store,
                                                                       monkeypatch):
    store, vectors = large_store
    monkeypatch.setattr(lance_store, "build_vector_index",
                        lambda *_: pytest.fail("trained in the test's process"))
    followed: list[int] = []
    real_follow = ChunkStore._caches_following_versions  # noqa: SLF001

    def counted(self):
        follow = real_follow(self)
        return lambda: followed.append(1) or follow()

    monkeypatch.setattr(ChunkStore, "_caches_following_versions", counted)
    assert fragments(store) > 1 and trained_rows(store._chunks) is None  # noqa: SLF001
    times = store.optimize()
    assert trained_rows(store._chunks) == ROWS and fragments(store) == 1  # noqa: SLF001
    assert followed  # the store kept up with the child's versions while it waited
    # What it took, the training's part of it said apart (the server logs both)
    # (the first compaction, in a child of its own, comes before the training)
    assert 0 < times.training_seconds < times.seconds
    assert "(of which the vector index's training and the rewrite after it: " in (
        times.describe())
    assert store.large()
    assert store.vector_search(vectors[1234], 1)[0]["id"] == "pkg/m12.py#1234"


def test_while_the_child_works_the_store_connects_again_after_each_of_its_commits(
        large_store, monkeypatch):
    """Searches meanwhile read the child's new versions into the caches; what they held of
    the versions before goes at once, not when the child ends."""
    store, vectors = large_store
    follow = store._caches_following_versions()  # noqa: SLF001
    session = store._session  # noqa: SLF001
    follow()
    assert store._session is session  # noqa: SLF001 (nothing committed: nothing to let go)
    other = lancedb.connect(str(store.index_dir)).open_table("chunks")
    other.delete("id = 'pkg/m0.py#0'")  # another process's commit
    follow()
    assert store._session is not session  # noqa: SLF001
    session = store._session  # noqa: SLF001
    follow()
    assert store._session is session  # noqa: SLF001
    assert store.vector_search(vectors[5], 1)[0]["id"] == "pkg/m0.py#5"


def test_the_store_is_called_while_it_waits_for_the_child(large_store):
    store, _vectors = large_store
    calls: list[int] = []
    assert retrain_in_child(store.index_dir, ROWS, KEEP, lambda: calls.append(1)) is (
        Outcome.DONE)
    assert calls  # the child takes a second or more: imports, training, compaction


def test_a_failure_while_waiting_does_not_end_the_child(large_store, caplog):
    store, _vectors = large_store

    def failing() -> None:
        raise RuntimeError("no version today")

    assert retrain_in_child(store.index_dir, ROWS, KEEP, failing) is Outcome.DONE
    assert trained_rows(store._chunks) == ROWS  # noqa: SLF001
    assert "no version today" in caplog.text


def test_when_the_child_fails_the_store_trains_in_its_own_process(large_store, monkeypatch):
    store, _vectors = large_store
    calls: list[str] = []
    monkeypatch.setattr(lance_store, "retrain_in_child",
                        lambda *args: calls.append("child") or Outcome.FAILED)
    assert store.optimize().training_seconds > 0  # trained here
    assert calls == ["child"]
    assert trained_rows(store._chunks) == ROWS and fragments(store) == 1  # noqa: SLF001


def test_a_child_that_trained_and_failed_to_compact_leaves_only_the_compaction(
        large_store, monkeypatch):
    store, _vectors = large_store

    def trained_only(index_dir, rows, *_):
        build_vector_index(store._chunks, rows)  # noqa: SLF001 (as the child would have)
        return Outcome.FAILED

    monkeypatch.setattr(lance_store, "retrain_in_child", trained_only)
    monkeypatch.setattr(lance_store, "build_vector_index",
                        lambda *_: pytest.fail("trained again in the test's process"))
    assert store.optimize().training_seconds is not None  # trained, if not here
    assert trained_rows(store._chunks) == ROWS and fragments(store) == 1  # noqa: SLF001


def test_a_child_killed_by_a_signal_is_not_followed_by_the_same_work_here(large_store,
                                                                          monkeypatch, caplog):
    """The likeliest signal is the out-of-memory killer's: the server would be next."""
    store, _vectors = large_store
    on_each_child(monkeypatch, lambda child: child.send_signal(signal.SIGKILL))
    monkeypatch.setattr(lance_store, "build_vector_index",
                        lambda *_: pytest.fail("trained in the test's process"))
    caplog.set_level(logging.WARNING, logger="rag_lsp.store.retraining")
    assert retrain_in_child(store.index_dir, ROWS, KEEP) is Outcome.KILLED
    assert "ended by signal 9" in caplog.records[-1].getMessage()
    times = store.optimize()  # the compaction before the training still runs
    assert trained_rows(store._chunks) is None  # noqa: SLF001
    assert times.training_seconds is None  # the log does not say it trained
    # and no other child for a while: a run compacts every few batches
    monkeypatch.setattr(subprocess, "Popen", lambda *_a, **_k: pytest.fail("started again"))
    assert store.optimize().training_seconds is None
    assert trained_rows(store._chunks) is None  # noqa: SLF001


def test_a_child_past_its_deadline_is_ended_and_not_followed_by_the_same_work_here(
        large_store, monkeypatch, caplog):
    """A child that never finishes (stopped here; a deadlock or a LanceDB bug in life) would
    hold the writer lock, and so stop indexing, for good."""
    store, _vectors = large_store
    children: list[subprocess.Popen] = []
    watchdogs: list[threading.Timer] = []

    def stopped(child: subprocess.Popen) -> None:
        children.append(child)
        child.send_signal(signal.SIGSTOP)
        # without a deadline the test would wait for ever: this ends the child by a signal
        # instead, an outcome the assertions below refuse
        watchdog = threading.Timer(30, lambda: child.poll() is None and child.kill())
        watchdog.daemon = True  # a failed test does not hold the run's end up
        watchdog.start()
        watchdogs.append(watchdog)

    on_each_child(monkeypatch, stopped)
    monkeypatch.setattr(retraining, "deadline_seconds", lambda rows: 1.0)
    monkeypatch.setattr(lance_store, "build_vector_index",
                        lambda *_: pytest.fail("trained in the test's process"))
    caplog.set_level(logging.WARNING, logger="rag_lsp.store.retraining")
    started = time.monotonic()
    assert retrain_in_child(store.index_dir, ROWS, KEEP) is Outcome.TIMED_OUT
    assert time.monotonic() - started < 30
    assert children[-1].poll() is not None  # ended, not left stopped
    assert "had not finished after 1 s" in caplog.records[-1].getMessage()
    # a child ended past its deadline trained nothing, and the log does not say it did
    assert store.optimize().training_seconds is None
    assert trained_rows(store._chunks) is None and len(children) == 2  # noqa: SLF001
    assert store.optimize().training_seconds is None  # no other child for a while
    assert len(children) == 2
    for watchdog in watchdogs:
        watchdog.cancel()


def test_a_child_that_ended_by_itself_at_its_deadline_keeps_its_outcome(large_store,
                                                                         monkeypatch):
    """Done as the deadline passes (here: already past when the wait starts) is done."""
    store, _vectors = large_store
    on_each_child(monkeypatch, lambda child: child.wait(timeout=120))
    monkeypatch.setattr(retraining, "deadline_seconds", lambda rows: 0.0)
    assert retrain_in_child(store.index_dir, ROWS, KEEP) is Outcome.DONE
    assert trained_rows(store._chunks) == ROWS  # noqa: SLF001


def test_the_deadline_grows_with_the_rows_and_leaves_room():
    assert retraining.deadline_seconds(100_000) >= 50 * 8.4  # the slowest seen at 100k
    assert retraining.deadline_seconds(1_000_000) > retraining.deadline_seconds(100_000)


def test_below_the_size_the_store_trains_in_its_own_process(large_store, monkeypatch):
    """A table that shrank below the size keeps its index; trained again (its segments), it
    is small: no child."""
    store, _vectors = large_store
    monkeypatch.setattr(lance_store, "retrain_in_child",
                        lambda *_: pytest.fail("a child for a small table"))
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS)
    store._train_and_compact(ROWS)  # noqa: SLF001
    assert trained_rows(store._chunks) == ROWS and fragments(store) == 1  # noqa: SLF001


def test_a_child_that_cannot_open_the_index_reports_its_error(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="rag_lsp.store.retraining")
    assert retrain_in_child(tmp_path / "missing", 10, KEEP) is Outcome.FAILED
    message = caplog.records[-1].getMessage()
    assert "in a child process failed (exit status 1" in message
    assert "chunks" in message and "doing it in this process" in message


def test_a_child_that_cannot_start_leaves_the_work_to_this_process(tmp_path, monkeypatch,
                                                                   caplog):
    caplog.set_level(logging.WARNING, logger="rag_lsp.store.retraining")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    assert retrain_in_child(tmp_path / "ix", 10, KEEP) is Outcome.FAILED
    assert "cannot start a process to train" in caplog.records[-1].getMessage()


def test_an_index_folder_named_relative_to_the_working_folder(large_store, monkeypatch):
    """The child runs from the folder that holds rag_lsp, not from the caller's."""
    store, _vectors = large_store
    monkeypatch.chdir(store.index_dir.parent)
    assert retrain_in_child(Path(store.index_dir.name), ROWS, KEEP) is Outcome.DONE
    assert trained_rows(store._chunks) == ROWS  # noqa: SLF001


def test_the_child_ends_when_its_parent_lets_go(large_store):
    """A server that exits (or is killed) mid-training closes the child's standard input:
    the child ends instead of writing to an index nobody holds the lock of."""
    store, _vectors = large_store
    child = subprocess.Popen(
        [sys.executable, "-m", "rag_lsp.store.retraining", str(store.index_dir), str(ROWS),
         "60", "0"], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=PACKAGE_PARENT)
    child.stdin.close()
    assert child.wait(timeout=60) == ENDED_WITH_PARENT
    assert trained_rows(store._chunks) is None  # noqa: SLF001


def _nice_values(pid: int) -> list[int]:
    """The nice value of each thread of process ``pid`` (field 19 of its stat)."""
    values = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            values.append(int(stat.read_text().rsplit(")", 1)[1].split()[16]))
        except (OSError, IndexError, ValueError):  # the thread ended
            continue
    return values


@linux_only
@pytest.mark.parametrize("from_lowered_thread", [False, True])
def test_every_thread_of_the_child_runs_below_the_searches_priority(large_store, monkeypatch,
                                                                   from_lowered_thread):
    """LanceDB's worker threads included (they start with its import, in the child after the
    priority is lowered): the point of the child is that searches go first. Started from a
    thread already lowered (the server's writer), it is lowered once, not twice."""
    store, _vectors = large_store
    seen: list[list[int]] = []
    outcome: list[Outcome] = []
    pids: list[int] = []
    on_each_child(monkeypatch, lambda child: pids.append(child.pid))

    def writer() -> None:
        if from_lowered_thread:
            priority.run_in_background()
        outcome.append(retrain_in_child(store.index_dir, ROWS, KEEP))

    thread = threading.Thread(target=writer)
    thread.start()
    while thread.is_alive():
        values = _nice_values(pids[0]) if pids else []
        if len(values) > 2:  # LanceDB's threads have started
            seen.append(values)
        time.sleep(0.005)
    thread.join()
    assert outcome == [Outcome.DONE] and seen
    expected = min(19, os.getpriority(os.PRIO_PROCESS, 0) + priority.BACKGROUND_NICENESS)
    assert {value for values in seen for value in values} == {expected}


# ---- past COMPACT_IN_CHILD_MIN_ROWS, below the ANN index's size: the compaction alone --------


@pytest.fixture
def mid_store(tmp_path, monkeypatch):
    """A store below the ANN index's size (its in-memory copy loaded) but past the size from
    which compactions run in a child, lowered below its 2,000 rows."""
    monkeypatch.setattr(vector_index, "COMPACT_IN_CHILD_MIN_ROWS", ROWS // 2)
    store, vectors = filled_store(tmp_path / "ix", np.random.default_rng(4))
    store._vectors._matrix = store._load_vectors()  # noqa: SLF001
    return store, vectors


def test_the_sizes_between_which_compactions_run_in_a_child():
    """From the size where the compaction weighs on a process holding its in-memory copy, up
    to the size where nothing is held (past it a child was measured and not adopted)."""
    low, high = vector_index.COMPACT_IN_CHILD_MIN_ROWS, vector_index.MATRIX_MAX_ROWS
    assert not compacts_in_a_child(low - 1) and not compacts_in_a_child(high + 1)
    assert compacts_in_a_child(low) is compacts_in_a_child(high) is (os.name == "posix")


def test_past_the_ann_index_size_the_first_compaction_stays_in_this_process(large_store,
                                                                            monkeypatch):
    store, _vectors = large_store
    monkeypatch.setattr(vector_index, "COMPACT_IN_CHILD_MIN_ROWS", 1)
    commands: list[list[str]] = []
    on_each_child(monkeypatch, lambda child: commands.append(child.args))
    store.optimize()
    assert len(commands) == 1 and commands[0][-1] != "compact"  # the training's child alone
    assert trained_rows(store._chunks) == ROWS and fragments(store) == 1  # noqa: SLF001


def test_past_the_size_the_compaction_runs_in_a_child_and_trains_nothing(mid_store,
                                                                        monkeypatch):
    store, vectors = mid_store
    commands: list[list[str]] = []
    on_each_child(monkeypatch, lambda child: commands.append(child.args))
    monkeypatch.setattr(ChunkStore, "_compact",
                        lambda self: pytest.fail("compacted in the test's process"))
    store.replace_files([lance_store.FileRecord("pkg/m3.py", 1, 1, "0" * 64, 1)],
                        rows_for("pkg/m3.py", vectors[300:301], 300))
    files_before = store._files.version  # noqa: SLF001
    assert fragments(store) > 1
    store.optimize()
    assert len(commands) == 1 and commands[0][-1] == "compact"
    assert fragments(store) == 1 and trained_rows(store._chunks) is None  # noqa: SLF001
    assert store._files.version > files_before  # noqa: SLF001 (compacted here)
    # The copy in memory took the compacted rows' new ids, and answers as a fresh load does.
    held = store._vectors._matrix  # noqa: SLF001
    assert held is not None and held.version == store.version()
    fresh = store._load_vectors()  # noqa: SLF001
    assert sorted(held.row_ids[held.alive if held.alive is not None else slice(None)]
                  .tolist()) == sorted(fresh.row_ids.tolist())
    for row in (5, 300, 1999):
        assert [r["id"] for r in store.vector_search(vectors[row], 3)] == [
            r["id"] for r in ChunkStore(store.index_dir, store.dim).vector_search(vectors[row], 3)]


def test_a_compaction_child_that_fails_leaves_the_compaction_to_this_process(mid_store,
                                                                            monkeypatch):
    store, _vectors = mid_store
    calls: list[str] = []
    monkeypatch.setattr(lance_store, "compact_in_child",
                        lambda *args: calls.append("child") or Outcome.FAILED)
    store.optimize()
    assert calls == ["child"] and fragments(store) == 1


def test_a_compaction_child_killed_by_a_signal_leaves_the_table_and_starts_none_for_a_while(
        mid_store, monkeypatch, caplog):
    store, _vectors = mid_store
    on_each_child(monkeypatch, lambda child: child.send_signal(signal.SIGKILL))
    monkeypatch.setattr(ChunkStore, "_compact",
                        lambda self: pytest.fail("compacted in the test's process"))
    caplog.set_level(logging.WARNING, logger="rag_lsp.store.retraining")
    before = fragments(store)
    store.optimize()
    assert "compacting" in caplog.text and "ended by signal 9" in caplog.text
    assert fragments(store) == before  # not compacted here: the server would be next
    monkeypatch.setattr(subprocess, "Popen", lambda *_a, **_k: pytest.fail("started again"))
    store.optimize()
    assert fragments(store) == before
    # the training's back-off is its own (a table that grows past the size trains at once)
    assert store._train_not_before == 0.0  # noqa: SLF001


def test_the_child_told_to_compact_only_does_not_train(large_store):
    """The compaction alone is what it was asked for (the child does not look at the size:
    this table is past the ANN index's size in this process only)."""
    store, _vectors = large_store
    assert compact_in_child(store.index_dir, ROWS, KEEP) is Outcome.DONE
    assert fragments(store) == 1 and trained_rows(store._chunks) is None  # noqa: SLF001
