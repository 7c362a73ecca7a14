"""The in-memory vector matrix, loaded batch by batch."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rag_lsp.store.vector_cache import VectorMatrix

DIM = 8


def batch(row_ids: list[int], vectors: np.ndarray) -> pa.RecordBatch:
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), DIM)
    return pa.record_batch([column, pa.array(row_ids, pa.uint64())], names=["vector", "_rowid"])


def unit(rng: np.random.Generator, rows: int) -> np.ndarray:
    v = rng.standard_normal((rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_batches_fill_one_matrix_even_past_the_counted_rows():
    rng = np.random.default_rng(3)
    vectors = unit(rng, 25)
    ids = [1000 - 7 * i for i in range(25)]  # not in order, as after deletions
    batches = [batch(ids[:10], vectors[:10]), batch(ids[10:20], vectors[10:20]),
               batch(ids[20:], vectors[20:])]
    matrix = VectorMatrix.from_batches(5, batches, rows=12, dim=DIM)  # 13 rows came later
    assert matrix.vectors.shape == (25, DIM) and matrix.version == 5
    for row_id, vector in zip(ids, vectors, strict=True):
        np.testing.assert_array_equal(matrix.vector_of(row_id), vector)
    assert matrix.vector_of(1) is None and matrix.vector_of(10**6) is None
    found, cosines = matrix.nearest(vectors[17], 3)
    assert found[0] == ids[17] and abs(float(cosines[0]) - 1.0) < 1e-6


def test_fewer_rows_than_counted_and_none_at_all():
    rng = np.random.default_rng(4)
    matrix = VectorMatrix.from_batches(1, [batch([3, 4], unit(rng, 2))], rows=10, dim=DIM)
    assert matrix.vectors.shape == (2, DIM)
    empty = VectorMatrix.from_batches(1, [], rows=0, dim=DIM)
    assert empty.nearest(unit(rng, 1)[0], 5)[0] == [] and empty.vector_of(3) is None
