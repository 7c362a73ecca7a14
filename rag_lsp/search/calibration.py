"""What an index looks like as a whole, so scores mean the same in every workspace.

A cosine of 0.35 is a strong match in one code base and noise in another: a random string of
letters reaches 0.4 against some chunks. So semantic evidence is measured as the margin over
the query's *background* similarity — its mean cosine to a sample of the index, which is
``query · mean(sample vectors)`` for unit vectors. Term rarity (for weighting which query words
a chunk covers) comes from the same sample, as does the index's vocabulary (a query word that
neither the model nor the index knows carries no evidence).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from rag_lsp.store.lance_store import ChunkStore

# Chosen by content hash (see ChunkStore.sample_rows), so fixed for a given set of chunks.
# 1,024 measured the same on the code benchmark and SciFact (within 0.001) and on off-topic
# questions (4.4 % vs 4.3 % held out), at four times the reading.
SAMPLE_SIZE = 256
# A changed index is re-sampled at most this often, on the search that finds it changed (a
# LanceDB scan: 20-55 ms at 10k chunks while a run writes). An index small enough to be
# sampled whole is re-sampled at every change: each chunk is much of it.
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
    """One background per store, re-sampled when the index changed (and not too often)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._background: Background | None = None
        self._version: int | None = None
        self._taken_at = 0.0

    def get(self, store: ChunkStore) -> Background:
        with self._lock:
            version = store.version()
            # (Not the sample's size: one by hash falls short of SAMPLE_SIZE as often as
            # not, and an index of 10k chunks was then scanned again by every search after
            # each of a run's writes: bench/README.md, "Searches during a branch switch".)
            stale = version != self._version and (
                self._background is None or self._background.whole
                or time.monotonic() - self._taken_at > REFRESH_SECONDS)
            if self._background is None or stale:
                self._background = build_background(*store.sample_rows(SAMPLE_SIZE))
                self._version, self._taken_at = version, time.monotonic()
            return self._background
