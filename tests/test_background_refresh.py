"""When the index is sampled again for a search's background (rag_lsp/search/calibration.py).

The sample is a LanceDB scan (20-55 ms at 10k chunks while a run writes). Past the first, a
search does not wait for it, unless the index is small enough to be sampled whole. A sample
by content hash falls short of SAMPLE_SIZE as often as not; it used to be taken for a small
index's whole sample, and every search after each of a run's writes scanned again (a branch
switch of a real repository: p95 40 ms in process, 22-26 after)."""

from __future__ import annotations

import threading

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


class HeldStore(CountingStore):
    """A store whose samples after the first wait until the test lets them go (or fail)."""

    def __init__(self, rows: int):
        super().__init__(rows, whole=False)
        self.let_go, self.sampling, self.fail = threading.Event(), threading.Event(), False

    def sample_rows(self, count: int) -> tuple[list[dict], bool]:
        if self.samples:
            self.sampling.set()
            assert self.let_go.wait(10)
            if self.fail:
                self.samples += 1
                raise OSError("the store was closed")
        return super().sample_rows(count)


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
    cache.wait_for_sampling()
    assert store.samples == 2  # once a changed index's sample is old enough


def test_a_search_does_not_wait_for_the_sample_it_starts(clock):
    store, cache = HeldStore(SAMPLE_SIZE - 3), BackgroundCache()
    first = cache.get(store)
    store.at_version += 1
    store.rows = SAMPLE_SIZE + 5
    clock[0] += calibration.REFRESH_SECONDS + 1
    assert cache.get(store) is first  # the sample before, while the new one is taken
    assert store.sampling.wait(10)
    assert cache.get(store) is first  # and no second sample meanwhile
    store.let_go.set()
    cache.wait_for_sampling()
    assert store.samples == 2
    assert cache.get(store).size == SAMPLE_SIZE + 5
    assert store.samples == 2  # in place for the version it was taken at


def test_a_sample_that_fails_leaves_the_one_before(clock):
    store, cache = HeldStore(SAMPLE_SIZE - 3), BackgroundCache()
    first = cache.get(store)
    store.at_version += 1
    store.fail = True
    store.let_go.set()
    clock[0] += calibration.REFRESH_SECONDS + 1
    cache.get(store)
    cache.wait_for_sampling()
    assert store.samples == 2
    assert cache.get(store) is first
    store.fail = False
    clock[0] += calibration.REFRESH_SECONDS + 1
    cache.get(store)  # tried again once the interval has passed
    cache.wait_for_sampling()
    assert cache.get(store) is not first and store.samples == 3


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
