"""When a search samples the index again for its background (rag_lsp/search/calibration.py).

The sample is a LanceDB scan on the search's own thread (20-55 ms at 10k chunks while a run
writes). A sample by content hash falls short of SAMPLE_SIZE as often as not; it used to be
taken for a small index's whole sample, and every search after each of a run's writes
scanned again (a branch switch of a real repository: p95 40 ms in process, 22-26 after)."""

from __future__ import annotations

import pytest

from rag_lsp.search import calibration
from rag_lsp.search.calibration import SAMPLE_SIZE, BackgroundCache
from rag_lsp.store.lance_store import ChunkStore


class CountingStore:
    """A store whose version and sample the test sets, counting the samples taken."""

    def __init__(self, rows: int, whole: bool):
        self.rows, self.whole, self.at_version, self.samples = rows, whole, 1, 0

    def version(self) -> int:
        return self.at_version

    def sample_rows(self, count: int) -> tuple[list[dict], bool]:
        self.samples += 1
        return [{"terms": "word", "vector": [1.0, 0.0]}] * self.rows, self.whole


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(calibration.time, "monotonic", lambda: now[0])
    return now


def test_a_sample_by_hash_short_of_the_size_is_not_taken_again_at_each_change(clock):
    store, cache = CountingStore(SAMPLE_SIZE - 17, whole=False), BackgroundCache()
    cache.get(store)
    for _ in range(5):  # a run's writes, each followed by a search
        store.at_version += 1
        clock[0] += 5
        assert cache.get(store).size == SAMPLE_SIZE - 17
    assert store.samples == 1
    clock[0] += calibration.REFRESH_SECONDS
    cache.get(store)
    assert store.samples == 2  # once a changed index's sample is old enough


def test_an_index_sampled_whole_is_sampled_again_at_each_change(clock):
    store, cache = CountingStore(40, whole=True), BackgroundCache()
    cache.get(store)
    store.at_version += 1
    cache.get(store)
    assert store.samples == 2
    cache.get(store)  # unchanged: the sample stands
    assert store.samples == 2


def test_the_store_says_whether_its_sample_is_every_chunk(workspace, embedder):
    store = ChunkStore(workspace.index_dir, embedder.dimension)
    total = store.count_chunks()
    assert total > 2
    rows, whole = store.sample_rows(total)
    assert whole and len(rows) == total
    rows, whole = store.sample_rows(total - 1)
    assert not whole  # (by hash: how many rows depends on the hashes, not on the count)
