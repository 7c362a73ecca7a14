"""The in-memory copy's vectors at a quarter of their size, searched exactly.

Each row of the copy (``rag_lsp.store.vector_cache``) is one int8 array row: the vector's
``dim`` 8-bit codes (the vector divided by its own scale, its largest component / 127,
rounded), then three numbers stored as bytes: the scale, the row's *bound* and its *slot*. The
float32 vectors themselves go to a file (:class:`ExactVectors`, row ``slot`` of it), which the
kernel caches and may drop, instead of the process's memory: 400 bytes a chunk in memory
instead of 1,536 (73 MB of the copy's 152 at 47.5k chunks).

A search (:func:`nearest`) scores every row from its codes, the same product as before over a
quarter of the bytes, then reads the exact vectors of only those rows that could be among the
``limit`` best and ranks them by their exact cosines. The bound makes that exact, not
approximate: a row's code score is within ``bound x |query|`` of its exact cosine (the length
of what the rounding took off, by Cauchy-Schwarz, plus what float32 rounding can add), so a
row whose best possible cosine is below the ``limit``-th best worst possible one cannot be
among the best, and every row that can is read. The rows and cosines are those of a float32
matrix (bench/README.md, "The in-memory copy in 8 bits").

Below :data:`FILE_MIN_ROWS` rows the float32 vectors stay in memory instead
(:class:`HeldVectors`) and a search takes one float32 product over them: a small matrix is
read from the CPU's cache faster than its codes are converted (12k rows: 0.4 against 1.3 ms a
query), and what the file would save there is small (13 MB at 12k rows).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

# Rows converted to float32 at a time for the code product: the block stays in the CPU's
# cache (47.5k x 384 codes: 3.8 ms a query in blocks of 1,024 rows, 8.6-9.1 in blocks of
# 2,048-4,096, 7.1 for the float32 matrix).
BLOCK_ROWS = 1024
_CODE_MAX = 127
# The float32 rounding of a dot product of ``dim`` codes (each at most 127) with a unit query
# is at most dim * 2**-24 * 127 * |query|_1 <= dim**1.5 * 127 * 2**-24 code units; twice that,
# added to each row's bound, covers it and the rounding of the scaling after.
_ROUNDING = 2.0 * 127 * 2.0 ** -24


# From this many rows a load keeps the float32 vectors in a file (ExactVectors), below in
# memory (HeldVectors): 16k x 384 float32 is 24 MB, and there the codes cost 0.7-0.9 ms more
# a query than one float32 product (bench/packed_vectors.py).
FILE_MIN_ROWS = 16_384
# Patches append the new rows' exact vectors and leave the replaced ones; once they hold this
# many times the matrix's rows (and more than the minimum: a small file is not worth a
# reload), a patch gives up and the reload after writes the live rows anew. Memory is held,
# and scored each search, so it keeps fewer.
EXACT_ROWS_MAX_SHARE = 3.0
EXACT_ROWS_MIN = FILE_MIN_ROWS
HELD_ROWS_MAX_SHARE = 1.5
HELD_STALE_ROWS_MIN = 4096


def exact_vectors_for(rows: int, dim: int, folder: Path | None) -> ExactVectors | HeldVectors:
    """Where a load of ``rows`` rows keeps their float32 vectors."""
    return HeldVectors(dim) if rows < FILE_MIN_ROWS else ExactVectors(dim, folder)


def packed_width(dim: int) -> int:
    """Bytes a row: the codes (padded to 8 bytes), then scale, bound (float32) and slot
    (int64)."""
    return -(-dim // 8) * 8 + 16


def _field(packed: np.ndarray, dim: int, at: int, dtype: type) -> np.ndarray:
    start = -(-dim // 8) * 8 + at
    size = np.dtype(dtype).itemsize
    return packed[:, start:start + size].view(dtype)[:, 0]


def scales(packed: np.ndarray, dim: int) -> np.ndarray:
    return _field(packed, dim, 0, np.float32)


def bounds(packed: np.ndarray, dim: int) -> np.ndarray:
    return _field(packed, dim, 4, np.float32)


def slots(packed: np.ndarray, dim: int) -> np.ndarray:
    """Each row's row in its :class:`ExactVectors` (a view: writable)."""
    return _field(packed, dim, 8, np.int64)


def pack(vectors: np.ndarray, first_slot: int, out: np.ndarray) -> None:
    """Write ``vectors`` (float32, rows x dim), whose exact copies are rows ``first_slot`` on
    of their file, into ``out`` (int8, rows x :func:`packed_width`)."""
    dim = vectors.shape[1]
    largest = np.abs(vectors).max(axis=1) if len(vectors) else np.empty(0, np.float32)
    scale = np.where(largest > 0, largest / _CODE_MAX, 1.0).astype(np.float32)
    codes = np.rint(vectors / scale[:, None])
    out[:, :dim] = codes
    out[:, dim:-(-dim // 8) * 8] = 0
    # The residual's length in float32 (in float64 packing 47.5k rows took 0.18 s instead of
    # 0.05), then made an upper bound of the exact one: each component is off by at most
    # 2**-24 x (127 x scale + |its residual|) <= 2**-24 x 128 x scale, the sum of squares by
    # at most dim x 2**-24 of it.
    residual = vectors - (codes * scale[:, None]).astype(np.float32)
    residual = np.sqrt(np.einsum("ij,ij->i", residual, residual))
    residual = residual * (1 + 2 * dim * 2.0 ** -24) + dim ** 0.5 * 130 * 2.0 ** -24 * scale
    scales(out, dim)[:] = scale
    bounds(out, dim)[:] = residual * (1 + 1e-6) + scale * dim ** 1.5 * _ROUNDING + 1e-7
    slots(out, dim)[:] = np.arange(first_slot, first_slot + len(vectors))


_blocks = threading.local()


def code_scores(packed: np.ndarray, dim: int, query: np.ndarray) -> np.ndarray:
    """Each row's cosine with ``query`` from its codes (within its bound times the query's
    length of the exact one)."""
    rows = len(packed)
    scores = np.empty(rows, dtype=np.float32)
    block = getattr(_blocks, "block", None)
    if block is None or block.shape[1] != dim:
        block = _blocks.block = np.empty((BLOCK_ROWS, dim), dtype=np.float32)
    query = np.ascontiguousarray(query, dtype=np.float32)
    for start in range(0, rows, BLOCK_ROWS):
        codes = packed[start:start + BLOCK_ROWS, :dim]
        converted = block[:len(codes)]
        np.copyto(converted, codes, casting="unsafe")
        np.dot(converted, query, out=scores[start:start + len(codes)])
    scores *= scales(packed, dim)
    return scores


def exact_cosines(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Row by row, summed the same way whatever the rows: a row's cosine does not depend on
    which other rows were read with it."""
    return np.einsum("ij,j->i", vectors, query.astype(np.float32, copy=False))


def nearest(packed: np.ndarray, dim: int, exact: ExactVectors | HeldVectors, query: np.ndarray,
            limit: int, dead: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the ``limit`` rows of ``packed`` closest to ``query`` (none of ``dead``;
    ``limit`` at most the live rows), closest first, and their exact cosines. Rows of equal
    cosine keep the earlier one first, so a patch that moves rows changes nothing."""
    if isinstance(exact, HeldVectors):
        return _nearest_held(packed, dim, exact, query, limit, dead)
    scores = code_scores(packed, dim, query)
    slack = bounds(packed, dim) * np.float32(np.linalg.norm(query))
    lower = scores - slack
    upper = np.add(scores, slack, out=scores)
    lower[dead] = -np.inf
    upper[dead] = -np.inf
    floor = np.partition(lower, len(lower) - limit)[len(lower) - limit]
    candidates = np.flatnonzero(upper >= floor)
    cosines = exact_cosines(exact.read(slots(packed[candidates], dim)), query)
    order = np.lexsort((candidates, -cosines))[:limit]
    return candidates[order], cosines[order]


def _nearest_held(packed: np.ndarray, dim: int, exact: HeldVectors, query: np.ndarray,
                  limit: int, dead: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nearest` from float32 vectors in memory: every cosine from one product (over
    every slot, the replaced rows' too: :meth:`HeldVectors.outgrown` keeps those few)."""
    cosines = (exact.held() @ query.astype(np.float32, copy=False))[slots(packed, dim)]
    cosines[dead] = -np.inf
    top = np.argpartition(-cosines, limit - 1)[:limit]
    # Every row as close as the last of them, so that ties go to the earlier rows
    top = np.flatnonzero(cosines >= cosines[top].min())
    top = top[np.lexsort((top, -cosines[top]))][:limit]
    return top, cosines[top]


class HeldVectors:
    """Float32 vectors in memory, appended in order (row ``slot``), for a copy of fewer than
    :data:`FILE_MIN_ROWS` rows: what :class:`ExactVectors` does with a file."""

    def __init__(self, dim: int):
        self.dim = dim
        self._lock = threading.Lock()
        self._rows = 0
        self._vectors = np.empty((0, dim), dtype=np.float32)

    @property
    def rows(self) -> int:
        return self._rows

    def outgrown(self, live_rows: int) -> bool:
        """Whether rows replaced since the load (a search still scores them) have made this
        worth writing anew (a patch's compact copy does: see VectorMatrix.patched), or the
        copy has grown to be kept in a file (the reload after a patch gives up does)."""
        return (self._rows > max(HELD_STALE_ROWS_MIN, HELD_ROWS_MAX_SHARE * live_rows)
                or live_rows >= FILE_MIN_ROWS)

    def append(self, vectors: np.ndarray) -> int:
        """Store ``vectors`` after the rows stored before; the slot of the first."""
        with self._lock:
            first, count = self._rows, len(vectors)
            if first + count > len(self._vectors):  # room for a quarter more (amortized)
                grown = np.empty((first + count + (first + count) // 4, self.dim), np.float32)
                grown[:first] = self._vectors[:first]
                self._vectors = grown  # a search under way keeps the array it took
            self._vectors[first:first + count] = vectors
            self._rows = first + count
        return first

    def renewable(self, live_rows: int) -> bool:
        """Whether a patch may write this anew (see :meth:`of_slots`) once outgrown: while
        the copy is small enough to stay in memory."""
        return live_rows < FILE_MIN_ROWS

    def held(self) -> np.ndarray:
        """Every slot's vector so far (a view: rows appended later are not in it)."""
        with self._lock:
            return self._vectors[:self._rows]

    def read(self, at: np.ndarray) -> np.ndarray:
        """The vectors in slots ``at``, in that order (a copy)."""
        return self.held()[np.asarray(at, dtype=np.int64)]

    def of_slots(self, at: np.ndarray) -> HeldVectors:
        """A new store of the vectors in slots ``at``, in that order (slot ``i`` of it is
        ``at[i]`` of this one)."""
        renewed = HeldVectors(self.dim)
        renewed.append(self.read(at))
        return renewed


class ExactVectors:
    """Float32 vectors in a file of their own, appended in order (row ``slot`` at byte
    ``slot x dim x 4``) and read back row by row. The file has no name (deleted as it is
    made), so it goes when the last matrix using it does, or with the process. It is made in
    ``folder`` (the index's, on the same disk) when it can be: the system's temporary folder
    may be memory (tmpfs), which would hold the vectors in memory after all."""

    def __init__(self, dim: int, folder: Path | None = None):
        self.dim = dim
        self._row_bytes = dim * 4
        self._lock = threading.Lock()
        self._rows = 0
        try:
            self._file = tempfile.TemporaryFile(dir=folder, buffering=0)
        except OSError as exc:
            if folder is None:
                raise
            log.debug("no file for exact vectors in %s (%s): the temporary folder", folder, exc)
            self._file = tempfile.TemporaryFile(buffering=0)
        self._fd = self._file.fileno()

    @property
    def rows(self) -> int:
        return self._rows

    def outgrown(self, live_rows: int) -> bool:
        """Whether the rows replaced since the load (left in the file) have made it worth
        writing anew: a patch then gives up, and the reload after writes a new file."""
        return self._rows > max(EXACT_ROWS_MIN, EXACT_ROWS_MAX_SHARE * live_rows)

    def renewable(self, live_rows: int) -> bool:
        """A file is written anew by the reload after a patch gives up, not by a patch."""
        return False

    def append(self, vectors: np.ndarray) -> int:
        """Write ``vectors`` after the rows written before; the slot of the first."""
        data = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1).view(np.uint8)
        with self._lock:
            first = self._rows
            offset, written = first * self._row_bytes, 0
            while written < len(data):
                written += _write_at(self._fd, self._file, data[written:], offset + written)
            self._rows += len(vectors)
        return first

    def read(self, at: np.ndarray) -> np.ndarray:
        """The vectors in slots ``at``, in that order."""
        out = np.empty((len(at), self.dim), dtype=np.float32)
        row_bytes = self._row_bytes
        for i, slot in enumerate(np.asarray(at, dtype=np.int64).tolist()):
            data = _read_at(self._fd, self._file, self._lock, row_bytes, slot * row_bytes)
            if len(data) != row_bytes:
                raise OSError(f"exact vector {slot} is missing from its file")
            out[i] = np.frombuffer(data, dtype=np.float32)
        return out


if hasattr(os, "pread"):
    def _read_at(fd: int, file, lock, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def _write_at(fd: int, file, data: memoryview, offset: int) -> int:
        return os.pwrite(fd, data, offset)
else:  # Windows: the file's position, under the lock
    def _read_at(fd: int, file, lock, size: int, offset: int) -> bytes:
        with lock:
            file.seek(offset)
            return file.read(size)

    def _write_at(fd: int, file, data: memoryview, offset: int) -> int:
        file.seek(offset)
        return file.write(data)
