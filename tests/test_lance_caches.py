"""LanceDB's caches of an index: let go of after each compaction by the writer, bounded and
sized to the index for every store (rag_lsp.store.lance_caches).

LanceDB keys what it caches by index file and table version, and each compaction writes new
ones: unbounded (its defaults are 6 GiB and 1 GiB), a process that keeps editing and searching
keeps every version's entries. The stores here are small, so the bounds are made small too."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lsp.store import lance_caches, lance_store, vector_index
from rag_lsp.store.lance_caches import index_cache_bytes, outgrown
from rag_lsp.store.lance_store import ChunkStore, FileRecord
from tests.test_vector_index import (
    DIM,
    ROWS,
    clustered,
    edit_and_optimize,
    filled_store,
    rows_for,
)

SMALL_INDEX_CACHE = 512 * 1024
SMALL_METADATA_CACHE = 256 * 1024
# What the stores below may hold with those bounds (ROWS chunks)
SMALL_BOUND = (max(SMALL_INDEX_CACHE, ROWS * lance_caches.INDEX_CACHE_BYTES_PER_ROW)
               + SMALL_METADATA_CACHE)


def test_the_index_cache_grows_with_the_rows_above_a_floor():
    floor = lance_caches.INDEX_CACHE_MIN_BYTES
    assert index_cache_bytes(0) == index_cache_bytes(1_000) == floor
    assert index_cache_bytes(100_000) == 100_000 * lance_caches.INDEX_CACHE_BYTES_PER_ROW
    assert index_cache_bytes(100_000) > floor
    # A connection makes way only for a cache a quarter larger than its own, or more.
    assert not outgrown(floor, 1_000)
    assert not outgrown(index_cache_bytes(100_000), 110_000)
    assert outgrown(index_cache_bytes(100_000), 130_000)
    assert outgrown(floor, 200_000)


def indexed_store(tmp_path) -> tuple[ChunkStore, np.random.Generator]:
    """ROWS chunks past the size where searches ask LanceDB (an ANN index, the full-text
    indexes), so that they fill its index cache."""
    rng = np.random.default_rng(7)
    store = filled_store(tmp_path / "ix", rng)[0]
    store.ensure_fts_index()
    store.optimize()
    return store, rng


@pytest.fixture
def small_bounds(monkeypatch):
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS // 2)
    monkeypatch.setattr(lance_caches, "INDEX_CACHE_MIN_BYTES", SMALL_INDEX_CACHE)
    monkeypatch.setattr(lance_caches, "METADATA_CACHE_BYTES", SMALL_METADATA_CACHE)


def edit_and_search(store: ChunkStore, rng: np.random.Generator, edits: int,
                    reader: ChunkStore | None = None) -> tuple[list[int], list[int]]:
    """Edits, each compacted (new index files, new versions) and searched by ``store`` and
    by ``reader`` (a store of the same index that never writes, as another process's);
    what LanceDB holds for each after each edit."""
    held: tuple[list[int], list[int]] = ([], [])
    for edit in range(edits):
        fresh = edit_and_optimize(store, rng, edit)
        for searcher, record in ((store, held[0]), (reader, held[1])):
            if searcher is None:
                continue
            assert searcher.vector_search(fresh[3], 5)[0]["id"] == \
                f"pkg/m{edit % 20}.py#{(edit % 20) * 100 + 3}"
            searcher.text_search("pass f7", 10, None)
            record.append(searcher.cached_bytes())
    return held


@pytest.fixture
def unbounded(small_bounds, monkeypatch):
    """LanceDB's caches as good as unbounded, as they are by default (6 GiB, 1 GiB)."""
    monkeypatch.setattr(lance_caches, "INDEX_CACHE_MIN_BYTES", 1 << 30)
    monkeypatch.setattr(lance_caches, "METADATA_CACHE_BYTES", 1 << 30)


def test_the_writer_lets_go_of_what_it_cached_of_older_versions(tmp_path, unbounded):
    """Connecting again after each compaction leaves the caches with the current version's
    entries only, whatever their bounds."""
    store, rng = indexed_store(tmp_path)
    held = edit_and_search(store, rng, 12)[0]
    assert max(held) < 1.5 * held[0], held


def test_without_connecting_again_the_writer_keeps_every_version(tmp_path, unbounded,
                                                                 monkeypatch):
    """The control: the same edits, the store never connecting again."""
    monkeypatch.setattr(ChunkStore, "_fit_caches", lambda self, stale=False: None)
    store, rng = indexed_store(tmp_path)
    held = edit_and_search(store, rng, 12)[0]
    assert held[-1] > 3 * held[0], held


def test_a_reader_beside_the_writer_stays_within_its_bounds(tmp_path, small_bounds):
    """A store that only reads follows the writer's versions and keeps what it read of
    each, up to its bounds."""
    store, rng = indexed_store(tmp_path)
    reader = ChunkStore(tmp_path / "ix", DIM)
    held = edit_and_search(store, rng, 12, reader)[1]
    assert max(held) <= 1.25 * SMALL_BOUND, held  # (an insert may go over before an eviction)


def test_unbounded_a_reader_keeps_every_version(tmp_path, unbounded):
    """The control: the same reader with LanceDB's caches as good as unbounded."""
    store, rng = indexed_store(tmp_path)
    reader = ChunkStore(tmp_path / "ix", DIM)
    held = edit_and_search(store, rng, 12, reader)[1]
    assert held[-1] > 2 * SMALL_BOUND, held


def test_a_store_filled_by_its_first_index_connects_again_with_larger_caches(
        tmp_path, small_bounds):
    store, rng = indexed_store(tmp_path)  # made empty: the floor; filled, then compacted
    assert store._cache_bytes == index_cache_bytes(ROWS) > SMALL_INDEX_CACHE  # noqa: SLF001
    fresh = edit_and_optimize(store, rng, 3)
    assert store.vector_search(fresh[0], 1)[0]["id"] == "pkg/m3.py#300"
    assert store.count_chunks() == ROWS
    # Opened again, an index of that size gets them at once.
    again = ChunkStore(tmp_path / "ix", DIM)
    assert again._cache_bytes == index_cache_bytes(ROWS)  # noqa: SLF001
    assert again.vector_search(fresh[0], 1)[0]["id"] == "pkg/m3.py#300"


def test_a_read_under_way_finishes_on_its_handle_while_the_store_connects_again(
        tmp_path, small_bounds, monkeypatch):
    store, rng = indexed_store(tmp_path)
    with store.one_version():
        taken = store._reading()  # noqa: SLF001 - the handle a read under way holds
        monkeypatch.setattr(lance_caches, "INDEX_CACHE_BYTES_PER_ROW",
                            4 * lance_caches.INDEX_CACHE_BYTES_PER_ROW)
        store._fit_caches()  # noqa: SLF001
        assert store._reading() is not taken  # noqa: SLF001 - later reads: the new one
        assert taken.count_rows() == ROWS
    assert store._cache_bytes == index_cache_bytes(ROWS)  # noqa: SLF001 - four times the first
    fresh = edit_and_optimize(store, rng, 5)
    assert store.vector_search(fresh[9], 1)[0]["id"] == "pkg/m5.py#509"


def test_after_a_compaction_the_writer_fills_the_new_caches_before_a_search_does(
        tmp_path, small_bounds, monkeypatch):
    """Past the size where LanceDB's indexes answer, the writer looks the indexes up once
    after connecting again, so that the next search finds them loaded."""
    store, rng = indexed_store(tmp_path)
    assert store.large()
    edit_and_optimize(store, rng, 1)
    warmed = store.cached_bytes()
    # the control: connecting again alone leaves the caches nearly empty
    monkeypatch.setattr(ChunkStore, "_warm_caches", lambda self: None)
    edit_and_optimize(store, rng, 2)
    cold = store.cached_bytes()
    assert warmed > 4 * cold, (warmed, cold)


def held_at_each_compaction(tmp_path, monkeypatch) -> tuple[list[int], list[int]]:
    """What the writer's caches held as each compaction began, and after each edit's searches
    (what the next compaction would find), over edits compacted and searched in turn; the
    ANN index is not trained again meanwhile (a retraining runs in a child process, whose
    caches are not the writer's)."""
    monkeypatch.setattr(vector_index, "MAX_SEGMENTS", 50)
    store, rng = indexed_store(tmp_path)
    at_compaction: list[int] = []
    compact = ChunkStore._compact  # noqa: SLF001

    def noting(self: ChunkStore) -> None:
        at_compaction.append(self.cached_bytes())
        compact(self)

    monkeypatch.setattr(ChunkStore, "_compact", noting)
    after_searches = edit_and_search(store, rng, 4)[0]
    return at_compaction, after_searches


def test_the_writer_lets_go_of_its_caches_before_a_compaction(tmp_path, small_bounds,
                                                              monkeypatch):
    """What the caches hold is of the version a compaction replaces: the writer connects
    again first, so that it does not sit under the compaction's own memory."""
    monkeypatch.setattr(lance_caches, "LET_GO_BEFORE_COMPACTION_BYTES", 1)
    at_compaction, after_searches = held_at_each_compaction(tmp_path, monkeypatch)
    assert len(at_compaction) >= 4, at_compaction
    assert max(at_compaction) < 0.1 * min(after_searches), (at_compaction, after_searches)


def test_caches_too_small_to_matter_stay_through_a_compaction(tmp_path, small_bounds,
                                                               monkeypatch):
    """The control, and the threshold: caches below it are kept (searches under way keep
    what they read), so each compaction after the first finds what the searches left."""
    monkeypatch.setattr(lance_caches, "LET_GO_BEFORE_COMPACTION_BYTES", 1 << 30)
    at_compaction, after_searches = held_at_each_compaction(tmp_path, monkeypatch)
    assert min(at_compaction[1:]) > 0.5 * min(after_searches), (at_compaction, after_searches)


def test_a_failure_to_connect_again_keeps_the_old_handles(tmp_path, small_bounds, monkeypatch,
                                                          caplog):
    """Connecting again is housekeeping: if it fails, before or after a committed compaction,
    the store logs it and goes on with the handles it has."""
    monkeypatch.setattr(lance_caches, "LET_GO_BEFORE_COMPACTION_BYTES", 1)
    store, rng = indexed_store(tmp_path)
    edit_and_search(store, rng, 1)  # caches filled: the writer would let go of them

    def refused(*_args, **_kwargs):
        raise OSError("too many open files")

    monkeypatch.setattr(lance_store, "connect", refused)
    fresh = edit_and_optimize(store, rng, 1)
    assert store.vector_search(fresh[4], 1)[0]["id"] == "pkg/m1.py#104"
    failures = [m for m in (r.getMessage() for r in caplog.records)
                if "could not connect again" in m]
    assert any("before a compaction" in m for m in failures), failures
    assert any("after a compaction" in m for m in failures), failures


def counted(name: str, lookup, calls: list[str]):
    """``lookup`` noting its ``name`` in ``calls`` each time it runs."""
    def run(*args, **kwargs):
        calls.append(name)
        return lookup(*args, **kwargs)
    return run


def test_the_warm_up_leaves_no_warnings_on_stderr(tmp_path, small_bounds, capfd, monkeypatch):
    """LanceDB warns on stderr (the editor's output pane, once per lookup) when a vector or
    full-text query leaves out its distance or score column: the warm-up asks for them."""
    store, rng = indexed_store(tmp_path)
    assert store.large()
    lookups: list[str] = []
    for name in ("nearest_rows", "text_rows"):
        monkeypatch.setattr(lance_store, name, counted(name, getattr(lance_store, name), lookups))
    capfd.readouterr()
    edit_and_optimize(store, rng, 1)  # no search: every lookup here is the warm-up's
    assert lookups.count("nearest_rows") == lance_store.WARM_UP_PROBES, lookups
    assert lookups.count("text_rows") == 2, lookups
    assert "Deprecation warning" not in capfd.readouterr().err


def reader_opened_before_the_first_index(tmp_path) -> tuple[ChunkStore, np.ndarray]:
    """A store that only reads (another window), opened on an empty index (caches at the
    floor), and the vectors of the ROWS chunks the writer has written and compacted since."""
    writer = ChunkStore(tmp_path / "ix", DIM, create=True)
    reader = ChunkStore(tmp_path / "ix", DIM)
    assert reader._cache_bytes == SMALL_INDEX_CACHE  # noqa: SLF001
    vectors = clustered(np.random.default_rng(5), ROWS)
    for start in range(0, ROWS, 100):
        path = f"pkg/m{start // 100}.py"
        writer.replace_files([FileRecord(path, 1, 1, "0" * 64, 100)],
                             rows_for(path, vectors[start:start + 100], start))
    writer.optimize()
    return reader, vectors


def test_a_reader_opened_on_a_small_index_gets_larger_caches_once_the_writer_grows_it(
        tmp_path, small_bounds):
    reader, vectors = reader_opened_before_the_first_index(tmp_path)
    assert reader.vector_search(vectors[42], 1)[0]["id"] == "pkg/m0.py#42"
    assert reader._cache_bytes == index_cache_bytes(ROWS)  # noqa: SLF001
    assert reader.vector_search(vectors[1234], 1)[0]["id"] == "pkg/m12.py#1234"


def test_a_reader_whose_tables_go_away_as_it_connects_again_keeps_searching(
        tmp_path, small_bounds, monkeypatch, caplog):
    """A rebuild being swapped in can take the tables away between a reader's look at the
    grown table and its new connection (LanceDB: a ValueError): the reader keeps the handles
    it has, and says so, instead of failing the search that asked."""
    reader, vectors = reader_opened_before_the_first_index(tmp_path)

    def tables_gone(*_args, **_kwargs):
        raise ValueError("Table 'chunks' was not found")

    monkeypatch.setattr(lance_store, "connect", tables_gone)
    assert reader.vector_search(vectors[1234], 1)[0]["id"] == "pkg/m12.py#1234"
    assert reader._cache_bytes == SMALL_INDEX_CACHE  # noqa: SLF001 - the old connection
    assert "could not connect again" in caplog.text and "for the grown table" in caplog.text
