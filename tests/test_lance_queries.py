"""A search's LanceDB queries: one round trip each, one version per read, the same rows as
LanceDB's synchronous builder. Real LanceDB on disk; random unit vectors."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from lancedb.background_loop import LOOP

from rag_lsp.store import lance_queries, vector_index
from rag_lsp.store.lance_store import RESULT_COLUMNS, ChunkStore, FileRecord
from rag_lsp.store.vector_cache import VectorCache, VectorMatrix
from rag_lsp.store.version_watch import VERSIONS_DIR, VersionWatch

DIM = 384
ROWS = 600
WORDS = ("parse", "route", "cache", "token", "render", "socket")


def rows_for(path: str, vectors: np.ndarray, first: int) -> list[dict]:
    rows = []
    for n, vector in enumerate(vectors):
        i = first + n
        word = WORDS[i % len(WORDS)]
        rows.append({"id": f"{path}#{i}", "path": path, "start_line": i + 1, "end_line": i + 1,
                     "language": "python", "kind": "function", "symbol": f"{word}_{i}",
                     "text": f"def {word}_{i}(): return {word}",
                     "search_text": f"{word} {word}_{i}",
                     "defines": f"{word}_{i}", "terms": word, "content_hash": f"{i:064x}",
                     "vector": vector})
    return rows


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An index past the (lowered) matrix size, with its ANN and full-text indexes."""
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS // 2)
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    for start in range(0, ROWS, 100):
        path = f"pkg/m{start // 100}.py"
        store.replace_files([FileRecord(path, 1, 1, "0" * 64, 100)],
                            rows_for(path, vectors[start:start + 100], start))
    store.ensure_fts_index()
    store.optimize()
    assert store.large()  # LanceDB answers: nothing in memory
    return store, vectors


def sync_only(monkeypatch) -> None:
    monkeypatch.setattr(lance_queries, "async_handle", lambda table: None)


def test_the_installed_lancedb_gives_the_one_trip_handle(store):
    """If an upgrade of LanceDB moves the handle, the fallback keeps searches right but slower:
    this fails so that the move is noticed."""
    assert lance_queries.async_handle(store[0]._chunks) is not None  # noqa: SLF001


@pytest.mark.parametrize("case", ["exact", "approximate", "filtered"])
def test_nearest_rows_match_the_synchronous_builder(store, monkeypatch, case):
    chunks_store, vectors = store
    table = chunks_store._chunks  # noqa: SLF001
    query = vectors[17] + 0.5 * vectors[300]
    query /= np.linalg.norm(query)
    kwargs = {"columns": [*RESULT_COLUMNS, "_distance"], "limit": 12,
              "where": "path IN ('pkg/m1.py', 'pkg/m4.py')" if case == "filtered" else None,
              "tune": vector_index.approximate if case == "approximate" else None}
    one_trip = lance_queries.nearest_rows(table, query, **kwargs)
    sync_only(monkeypatch)
    builder = lance_queries.nearest_rows(table, query, **kwargs)
    assert len(one_trip) == 12
    assert [r["id"] for r in one_trip] == [r["id"] for r in builder]
    assert one_trip == builder
    if case == "filtered":
        assert {r["path"] for r in one_trip} <= {"pkg/m1.py", "pkg/m4.py"}


@pytest.mark.parametrize("column", ["search_text", "defines"])
def test_text_rows_match_the_synchronous_builder(store, monkeypatch, column):
    table = store[0]._chunks  # noqa: SLF001
    text = "route" if column == "search_text" else "route_13 cache_2"
    kwargs = {"column": column, "columns": [*RESULT_COLUMNS, "_score"], "limit": 20,
              "where": "path != 'pkg/m0.py'" if column == "search_text" else None,
              "with_row_id": column == "defines"}
    one_trip = lance_queries.text_rows(table, text, **kwargs)
    sync_only(monkeypatch)
    builder = lance_queries.text_rows(table, text, **kwargs)
    assert one_trip and one_trip == builder
    if column == "defines":
        assert {r["defines"] for r in one_trip} == {"route_13", "cache_2"}
        assert all("_rowid" in r for r in one_trip)
    else:
        assert all(r["path"] != "pkg/m0.py" and "route" in r["terms"] for r in one_trip)


def count_trips(monkeypatch) -> list[int]:
    """Round trips to LanceDB's event loop from here on."""
    trips = [0]
    run = LOOP.run

    def counted(future):
        trips[0] += 1
        return run(future)

    monkeypatch.setattr(LOOP, "run", counted)
    return trips


def test_a_read_asks_lancedb_once_per_query_and_for_the_version_only_after_a_commit(
        store, monkeypatch):
    chunks_store, vectors = store
    settled = time.time_ns() - 10_000_000_000  # the last commit long past (a tick or more)
    os.utime(chunks_store.index_dir / "chunks.lance" / VERSIONS_DIR, ns=(settled, settled))
    trips = count_trips(monkeypatch)

    def one_read() -> int:
        before = trips[0]
        with chunks_store.one_version():
            chunks_store.vector_search(vectors[5], 10)
            chunks_store.text_search("parse", 10, with_vectors=False)
            chunks_store.text_search("parse_6", 10, column="defines", with_vectors=False)
            chunks_store.version()
        return trips[0] - before

    # Three queries and one look at the version (LanceDB's own builder took 19 here); the
    # first read of a version may take one more, to move the reading handle to it (unless
    # something asked about that version before). The table's folder unchanged since, the
    # next reads take the version from it (rag_lsp.store.version_watch).
    assert one_read() in (4, 5)
    assert one_read() == 3
    assert one_read() == 3


def test_one_read_sees_one_version_and_the_next_read_sees_the_write(store):
    chunks_store, vectors = store
    before = chunks_store.version()
    writer_done = threading.Event()

    def write() -> None:  # another thread writes while the read is under way
        chunks_store.replace_files([FileRecord("pkg/new.py", 1, 1, "0" * 64, 1)],
                                   rows_for("pkg/new.py", vectors[:1], ROWS))
        writer_done.set()

    with chunks_store.one_version():
        assert chunks_store.version() == before
        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
        assert writer_done.is_set()
        assert chunks_store.version() == before  # the read's snapshot
        with chunks_store.one_version():  # a nested read keeps the outer one's version
            assert chunks_store.version() == before
        assert chunks_store.version() == before
    assert chunks_store.version() > before  # outside a read: the latest
    with chunks_store.one_version():
        assert chunks_store.version() > before


def count_version_lookups(monkeypatch) -> list[int]:
    """Looks at the table's latest version from here on (each asks LanceDB, unless the
    table's folder shows no commit since the last ask: see test_version_watch.py)."""
    looked = [0]
    latest = VersionWatch.latest

    def counted(watch):
        looked[0] += 1
        return latest(watch)

    monkeypatch.setattr(VersionWatch, "latest", counted)
    return looked


def test_lookups_of_the_version_within_a_read_go_to_lancedb_once(store, monkeypatch):
    chunks_store, _vectors = store
    looked = count_version_lookups(monkeypatch)
    with chunks_store.one_version():
        for _ in range(3):
            chunks_store.version()
            chunks_store.vectors_in_memory()
    assert looked[0] == 1
    chunks_store.version()
    chunks_store.version()
    assert looked[0] == 3  # no read under way: each asks


def test_a_matrix_newer_than_the_reads_version_is_not_loaded_again():
    loads = []
    loaded = threading.Event()

    def load() -> VectorMatrix:
        loads.append(1)
        loaded.set()
        return matrix_of(7)

    cache = VectorCache(load)
    cache._matrix = matrix_of(6)  # noqa: SLF001 (loaded just after a read took version 5)
    assert cache.current(5) is None
    assert not loaded.wait(0.3) and loads == []  # nothing newer to load
    assert cache.current(6) is not None
    assert cache.current(7) is None  # older than the table: loaded again
    assert loaded.wait(5) and loads == [1]


def matrix_of(version: int) -> VectorMatrix:
    return VectorMatrix.from_batches(version, [], 0, DIM)


def test_a_workspace_search_looks_at_the_version_once(workspace, monkeypatch):
    """Real model and index: the vector, full-text and definition lookups and the ranking's
    calibration all see the version the search's read took."""
    workspace.search("http client")
    store = workspace._index.store()  # noqa: SLF001
    deadline = time.monotonic() + 30
    while store.vectors_in_memory() is None:  # the background load, which asks for itself
        assert time.monotonic() < deadline, "the vectors were not loaded into memory"
        time.sleep(0.05)
    looked = count_version_lookups(monkeypatch)
    response = workspace.search("MAX_HOPS redirect limit")
    assert response.results
    assert looked[0] == 1


def test_a_version_left_by_a_lookup_that_outlived_its_read_is_not_used(store):
    """A full-text lookup still running when its read ended (the read raised) may set the
    read's version afterwards: the next read takes its own."""
    chunks_store, vectors = store
    with chunks_store.one_version():
        old = chunks_store.version()
    chunks_store._read_version = old  # noqa: SLF001 (what the late lookup leaves)
    chunks_store.replace_files([FileRecord("pkg/new.py", 1, 1, "0" * 64, 1)],
                               rows_for("pkg/new.py", vectors[:1], ROWS))
    with chunks_store.one_version():
        assert chunks_store.version() > old
