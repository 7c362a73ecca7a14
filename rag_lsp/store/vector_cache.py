"""Every chunk vector of the current table version in memory, for exact nearest neighbours.

LanceDB's brute-force vector search costs ~15-25 ms per query at 10k chunks on two cores,
nearly all of it overhead; one matrix-vector product over the same vectors takes under 1 ms
(12k x 384 float32 = 18 MB). The matrix belongs to one table version: after any write the
store falls back to LanceDB until a background reload (at most one every few seconds, so an
indexing run is not slowed down) has caught up. Row ids (``_rowid``) find the rows again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)

RELOAD_INTERVAL_SECONDS = 5.0  # while the table keeps changing, reload at most this often


@dataclass(frozen=True)
class VectorMatrix:
    version: int
    row_ids: np.ndarray  # uint64, one per row
    vectors: np.ndarray  # float32, rows x dim, unit length
    position: dict[int, int]  # row id -> row index in ``vectors``

    @classmethod
    def from_table(cls, version: int, table: pa.Table, dim: int) -> VectorMatrix:
        row_ids = table.column("_rowid").to_numpy()
        flat = table.column("vector").combine_chunks().flatten()
        vectors = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float32)
        vectors = vectors.reshape(-1, dim)
        return cls(version, row_ids, vectors, {int(r): i for i, r in enumerate(row_ids)})

    def nearest(self, query: np.ndarray, limit: int) -> tuple[list[int], np.ndarray]:
        """Row ids of the ``limit`` closest rows, closest first, and their cosines."""
        if len(self.row_ids) == 0:
            return [], np.empty(0, dtype=np.float32)
        scores = self.vectors @ query
        limit = min(limit, len(scores))
        top = np.argpartition(-scores, limit - 1)[:limit]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [int(r) for r in self.row_ids[top]], scores[top]

    def vector_of(self, row_id: int) -> np.ndarray | None:
        index = self.position.get(row_id)
        return None if index is None else self.vectors[index]


class VectorCache:
    """Holds the newest loaded :class:`VectorMatrix`; reloads it in the background."""

    def __init__(self, load: Callable[[], VectorMatrix]):
        self._load = load
        self._matrix: VectorMatrix | None = None
        self._lock = threading.Lock()
        self._loading = False
        self._last_attempt = float("-inf")

    def current(self, version: int) -> VectorMatrix | None:
        """The matrix if it is of ``version``; else ``None``, and a reload is started."""
        matrix = self._matrix
        if matrix is not None and matrix.version == version:
            return matrix
        self._reload_soon()
        return None

    def _reload_soon(self) -> None:
        with self._lock:
            now = time.monotonic()
            if self._loading or now - self._last_attempt < RELOAD_INTERVAL_SECONDS:
                return
            self._loading, self._last_attempt = True, now
        threading.Thread(target=self._reload, name="rag-vectors", daemon=True).start()

    def _reload(self) -> None:
        try:
            self._matrix = self._load()
        except Exception as exc:  # the LanceDB search path keeps working without it
            log.debug("could not load the vectors into memory: %s", exc)
        finally:
            with self._lock:
                self._loading = False

    def drop(self) -> None:
        self._matrix = None
