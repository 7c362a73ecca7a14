"""What an index looks like as a whole, so scores mean the same in every workspace.

A cosine of 0.35 is a strong match in one code base and noise in another: a random string of
letters reaches 0.4 against some chunks. So semantic evidence is measured as the margin over
the query's *background* similarity — its mean cosine to a sample of the index, which is
``query · mean(sample vectors)`` for unit vectors. Term rarity (for weighting which query words
a chunk covers) comes from the same sample, as does the index's vocabulary (a query word that
neither the model nor the index knows carries no evidence).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from rag_lsp.priority import run_in_background
from rag_lsp.store.lance_store import ChunkStore

log = logging.getLogger(__name__)

# Chosen by content hash (see ChunkStore.sample_rows), so fixed for a given set of chunks.
# 1,024 measured the same on the code benchmark and SciFact (within 0.001) and on off-topic
# questions (4.4 % vs 4.3 % held out), at four times the reading.
SAMPLE_SIZE = 256
# A changed index is sampled again at most this often, aside from the searches (see
# BackgroundCache). An index small enough to be sampled whole is sampled again at every
# change: each chunk is much of it.
REFRESH_SECONDS = 60.0
# In a tiny index the chunks that answer a query *are* most of the sample, so its mean
# similarity is the answer's, not the noise's: a one-chunk workspace found nothing at all. The
# noise level is therefore estimated with a prior worth PRIOR_WEIGHT sampled chunks:
# PRIOR_SIMILARITY is the median background similarity of the code benchmark's 190 queries
# (0.10-0.27 by repository). At 256 sampled chunks the prior moves it by 1.5 % of the gap.
PRIOR_SIMILARITY = 0.17
PRIOR_WEIGHT = 4


@dataclass
class Background:
    mean_vector: np.ndarray | None  # None when the index is empty or has no vectors
    document_frequency: dict[str, int] = field(default_factory=dict)
    size: int = 0
    whole: bool = True  # the sample is every chunk of the index

    def similarity(self, query_vector: np.ndarray) -> float:
        """The query's mean cosine to the index (its noise level)."""
        if self.mean_vector is None:
            return 0.0
        sampled = float(self.mean_vector @ query_vector)
        return ((self.size * sampled + PRIOR_WEIGHT * PRIOR_SIMILARITY)
                / (self.size + PRIOR_WEIGHT))

    def idf(self, term: str) -> float:
        """Rarity of ``term``: high for words few chunks contain, about 0 for everywhere."""
        return math.log((self.size + 1) / (self.document_frequency.get(term, 0) + 0.5))

    def knows(self, term: str) -> bool:
        return term in self.document_frequency


def build_background(rows: list[dict], whole: bool = True) -> Background:
    frequency: dict[str, int] = {}
    vectors = []
    for row in rows:
        for term in set((row.get("terms") or "").split()):
            frequency[term] = frequency.get(term, 0) + 1
        if row.get("vector") is not None:
            vectors.append(np.asarray(row["vector"], dtype=np.float32))
    mean = np.mean(vectors, axis=0) if vectors else None
    return Background(mean, frequency, len(rows), whole)


class BackgroundCache:
    """One background per store, sampled again when the index changed (and not too often).

    A search never waits for a sample it can do without: past the first, a changed index
    is sampled again on a thread of its own, at the background priority, while searches go on
    with the sample before (a LanceDB scan of the sample's rows: 20-55 ms at 10k chunks while
    a run writes, once a minute on some search's thread before). Only an index small enough
    to be sampled whole is sampled again by the search that finds it changed: there each
    chunk is much of the sample, and the scan is short."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._background: Background | None = None
        self._version: int | None = None
        self._taken_at = 0.0
        self._sampling: threading.Thread | None = None

    def get(self, store: ChunkStore) -> Background:
        with self._lock:
            version = store.version()
            if version == self._version and self._background is not None:
                return self._background
            # (Not the sample's size: one by hash falls short of SAMPLE_SIZE as often as
            # not, and an index of 10k chunks was then scanned again by every search after
            # each of a run's writes: bench/README.md, "Searches during a branch switch".)
            if self._background is None or self._background.whole:
                self._take(store, version)
            elif (time.monotonic() - self._taken_at > REFRESH_SECONDS
                  and self._sampling is None):
                self._taken_at = time.monotonic()
                # Not a daemon: a daemon thread still inside LanceDB's native reader while
                # the interpreter finalised aborted the process (see VectorCache._reload_soon).
                self._sampling = threading.Thread(
                    target=self._sample_aside, args=(store, version), name="rag-background")
                self._sampling.start()
            return self._background

    def wait_for_sampling(self) -> None:
        """Until a sample taken aside (if any) is in place (for tests)."""
        with self._lock:
            sampling = self._sampling
        if sampling is not None:
            sampling.join()

    def _take(self, store: ChunkStore, version: int) -> None:
        self._background = build_background(*store.sample_rows(SAMPLE_SIZE))
        self._version, self._taken_at = version, time.monotonic()

    def _sample_aside(self, store: ChunkStore, version: int) -> None:
        run_in_background()
        try:
            background = build_background(*store.sample_rows(SAMPLE_SIZE))
        except Exception as exc:  # (a store closed meanwhile): the sample before stands
            log.debug("could not sample the index again: %s", exc)
            background = None
        with self._lock:
            if background is not None:
                self._background, self._version = background, version
            self._sampling = None
