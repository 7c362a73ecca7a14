"""The chunks table's latest version is asked of LanceDB only when its ``_versions`` folder
may have changed (rag_lsp.store.version_watch): searches skip a round trip through LanceDB's
event loop, and never miss a commit, this process's or another's."""

from __future__ import annotations

import os
import time

import numpy as np

from rag_lsp.store import version_watch
from rag_lsp.store.lance_store import ChunkStore, FileRecord
from rag_lsp.store.version_watch import VERSIONS_DIR, VersionWatch
from tests.test_vector_index import DIM, rows_for

SETTLED_AGO_NS = 10 * 1_000_000_000  # past any file system's tick


class Table:
    """A stand-in for LanceDB's answer: the folder is real, the version a counter."""

    def __init__(self, table_dir):
        self.folder = table_dir / VERSIONS_DIR
        self.folder.mkdir(parents=True)
        self.version = 1
        self.commit(ago_ns=SETTLED_AGO_NS)

    def commit(self, *, ago_ns: int = 0, mtime_ns: int | None = None) -> None:
        """A new manifest in the folder; its mtime ``ago_ns`` before now, or ``mtime_ns``."""
        (self.folder / f"{self.version}.manifest").write_text("")
        self.version += 1
        stamp = time.time_ns() - ago_ns if mtime_ns is None else mtime_ns
        os.utime(self.folder, ns=(stamp, stamp))


def test_a_settled_folder_is_asked_once_and_a_commit_is_seen_at_once(tmp_path):
    table = Table(tmp_path)
    watch = VersionWatch(tmp_path, lambda: table.version)
    assert [watch.latest() for _ in range(5)] == [2] * 5
    assert watch.asks == 1
    table.commit(ago_ns=SETTLED_AGO_NS)  # (settled at once, so the next answer is kept)
    assert [watch.latest() for _ in range(3)] == [3] * 3
    assert watch.asks == 2


def test_a_folder_changed_within_a_tick_is_asked_until_it_settles(tmp_path, monkeypatch):
    table = Table(tmp_path)
    table.commit()  # just now: a second commit within the same tick would keep this mtime
    watch = VersionWatch(tmp_path, lambda: table.version)
    assert watch.latest() == 3
    racy_mtime = os.stat(table.folder).st_mtime_ns
    table.commit(mtime_ns=racy_mtime)  # the same tick: the folder's key did not move
    assert watch.latest() == 4  # asked again, not taken from the unchanged folder
    assert watch.asks == 2
    monkeypatch.setattr(version_watch, "_FINE_SETTLE_NS", 0)  # the tick has passed
    assert [watch.latest() for _ in range(3)] == [4] * 3
    assert watch.asks == 3


def test_whole_second_timestamps_settle_only_after_two_seconds(tmp_path):
    table = Table(tmp_path)
    watch = VersionWatch(tmp_path, lambda: table.version)
    now_ns = time.time_ns()
    table.commit(mtime_ns=now_ns - now_ns % 1_000_000_000 - 1_000_000_000)  # (FAT, some NFS)
    watch.latest()
    watch.latest()
    assert watch.asks == 2  # a second ago is not old enough where times are whole seconds
    table.commit(mtime_ns=now_ns - now_ns % 1_000_000_000 - 3_000_000_000)
    watch.latest()
    watch.latest()
    assert watch.asks == 3


def test_a_missing_folder_is_always_asked(tmp_path):
    watch = VersionWatch(tmp_path / "gone", lambda: 7)
    assert [watch.latest() for _ in range(3)] == [7] * 3
    assert watch.asks == 3


def _file(store: ChunkStore, path: str, seed: int) -> None:
    vectors = np.random.default_rng(seed).standard_normal((3, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.replace_files([FileRecord(path, 1, 1, "0" * 64, 3)], rows_for(path, vectors))


def _settle(store: ChunkStore) -> None:
    """Make the table's last commit older than a tick (as between a user's edits)."""
    folder = store.index_dir / "chunks.lance" / VERSIONS_DIR
    stamp = time.time_ns() - SETTLED_AGO_NS
    os.utime(folder, ns=(stamp, stamp))


def test_a_reader_skips_the_round_trip_until_another_writer_commits(tmp_path):
    writer = ChunkStore(tmp_path / "ix", DIM, create=True)
    _file(writer, "a.py", 1)
    _settle(writer)
    reader = ChunkStore(tmp_path / "ix", DIM)  # as another process
    first = reader.version()
    asks = reader._latest.asks
    for _ in range(20):
        assert reader.version() == first
        assert {row["path"] for row in reader.chunk_rows("true", ["path"])} == {"a.py"}
    assert asks >= 1 and reader._latest.asks == asks  # from the folder's key since

    _file(writer, "b.py", 2)  # a commit the reader never heard of
    assert reader.version() > first
    assert {row["path"] for row in reader.chunk_rows("true", ["path"])} == {"a.py", "b.py"}
    # The writer's own next read sees its commit too.
    assert writer.version() == reader.version()
