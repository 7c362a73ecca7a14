"""The in-memory copy's 8-bit vectors: exact nearest rows, exact cosines, and the float32
vectors behind them (in a file, or in memory for a small copy)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rag_lsp.store import packed_vectors
from rag_lsp.store.packed_vectors import (
    ExactVectors,
    HeldVectors,
    bounds,
    code_scores,
    exact_cosines,
    pack,
    packed_width,
)
from rag_lsp.store.vector_cache import VectorMatrix


def packed_rows(vectors: np.ndarray, folder=None, held: bool = False
                ) -> tuple[np.ndarray, ExactVectors | HeldVectors]:
    exact = HeldVectors(vectors.shape[1]) if held else ExactVectors(vectors.shape[1], folder)
    packed = np.empty((len(vectors), packed_width(vectors.shape[1])), dtype=np.int8)
    pack(vectors, exact.append(vectors), packed)
    return packed, exact


def hard_vectors(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    """Unit vectors crowded together (a small spread around few centres: many cosines
    within the rounding's reach of each other), exact duplicates, and a zero vector."""
    centres = rng.standard_normal((4, dim))
    v = centres[rng.integers(0, 4, rows)] + 0.05 * rng.standard_normal((rows, dim))
    v[10:20] = v[0]  # ties
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v[-1] = 0.0
    return v.astype(np.float32)


def float_nearest(vectors: np.ndarray, query: np.ndarray, limit: int, dead: np.ndarray,
                  held: bool = False):
    """Every row ranked by its float32 cosine, ties the earlier row first (each cosine summed
    as the search sums it: from a file row by row, in memory one product over all rows, which
    may round a last bit otherwise)."""
    cosines = vectors @ query if held else exact_cosines(vectors, query)
    cosines[dead] = -np.inf
    order = np.lexsort((np.arange(len(vectors)), -cosines))[:limit]
    return order, cosines[order]


@pytest.mark.parametrize("held", [False, True], ids=["in a file", "in memory"])
@pytest.mark.parametrize("dim", [8, 12, 384])
def test_the_nearest_rows_and_cosines_are_those_of_the_float_vectors(dim, held):
    rng = np.random.default_rng(dim)
    vectors = hard_vectors(rng, 3000, dim)
    packed, exact = packed_rows(vectors, held=held)
    assert packed.dtype == np.int8 and packed.shape == (3000, -(-dim // 8) * 8 + 16)
    dead = rng.choice(3000, 300, replace=False)
    queries = [vectors[0], vectors[5], 2.5 * vectors[7]] + list(rng.standard_normal((5, dim)))
    for query in queries:
        query = query.astype(np.float32)
        for limit in (1, 10, 70, 2700):
            found, cosines = packed_vectors.nearest(packed, dim, exact, query, limit, dead)
            want, want_cosines = float_nearest(vectors, query, limit, dead, held)
            assert found.tolist() == want.tolist()
            np.testing.assert_allclose(cosines, want_cosines, rtol=0, atol=1e-5)


def test_no_code_score_is_further_from_the_exact_cosine_than_its_bound():
    rng = np.random.default_rng(7)
    vectors = hard_vectors(rng, 2000, 384)
    packed, _ = packed_rows(vectors)
    for query in [vectors[3], *rng.standard_normal((20, 384)).astype(np.float32)]:
        error = np.abs(code_scores(packed, 384, query) - vectors @ query)
        assert np.all(error <= bounds(packed, 384) * np.linalg.norm(query))
        assert error.max() > 0  # the codes are not the vectors


def test_exact_vectors_come_back_from_a_file_without_a_name(tmp_path):
    rng = np.random.default_rng(8)
    vectors = rng.standard_normal((50, 16)).astype(np.float32)
    exact = ExactVectors(16, tmp_path)
    assert exact.append(vectors[:20]) == 0 and exact.append(vectors[20:20]) == 20
    assert exact.append(vectors[20:]) == 20 and exact.rows == 50
    np.testing.assert_array_equal(exact.read(np.array([49, 0, 21, 21])), vectors[[49, 0, 21, 21]])
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the index's folder
    with pytest.raises(OSError, match="exact vector 50"):
        exact.read(np.array([50]))


def test_a_folder_it_cannot_write_to_falls_back_on_the_temporary_one(tmp_path):
    exact = ExactVectors(4, tmp_path / "gone")  # a folder deleted meanwhile
    exact.append(np.ones((3, 4), np.float32))
    np.testing.assert_array_equal(exact.read(np.array([2])), np.ones((1, 4)))


@pytest.mark.parametrize("held", [False, True], ids=["in a file", "in memory"])
def test_a_matrix_holds_codes_and_patches_append_to_its_exact_vectors(monkeypatch, held):
    rng = np.random.default_rng(9)
    dim = 384
    vectors = rng.standard_normal((40, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    if not held:
        monkeypatch.setattr(packed_vectors, "FILE_MIN_ROWS", 30)

    def rows(first: int, count: int, path: str) -> pa.RecordBatch:
        flat = pa.array(vectors[first:first + count].ravel(), pa.float32())
        return pa.record_batch(
            [pa.FixedSizeListArray.from_arrays(flat, dim),
             pa.array(range(first, first + count), pa.uint64()), pa.array([path] * count)],
            names=["vector", "_rowid", "path"])

    matrix = VectorMatrix.from_batches(1, [rows(0, 30, "a.py")], 30, dim, ["path"])
    assert isinstance(matrix.exact, HeldVectors if held else ExactVectors)
    assert matrix.vectors.nbytes == 30 * 400  # against 30 x 1,536 as float32
    patched = matrix.patched(2, ["b.py"], [rows(30, 10, "b.py")], 0)
    assert patched is not None and patched.exact is matrix.exact and matrix.exact.rows == 40
    np.testing.assert_array_equal(patched.vector_of(35), vectors[35])
    found, cosines = patched.nearest(vectors[35], 1)
    assert patched.row_ids[found].tolist() == [35] and abs(cosines[0] - 1) < 1e-6
    # The replaced rows' vectors stay: once they are too many, a patch gives up (the reload
    # that follows keeps the live rows' only).
    monkeypatch.setattr(packed_vectors, "EXACT_ROWS_MIN", 0)
    monkeypatch.setattr(packed_vectors, "EXACT_ROWS_MAX_SHARE", 1.2)
    monkeypatch.setattr(packed_vectors, "HELD_STALE_ROWS_MIN", 0)
    monkeypatch.setattr(packed_vectors, "HELD_ROWS_MAX_SHARE", 1.2)
    again = patched.patched(3, ["b.py"], [rows(30, 10, "b.py")], 0)
    assert again is not None and matrix.exact.rows == 50
    found, _ = again.nearest(vectors[35], 1)  # the row's new copy, not the masked one
    assert again.row_ids[found].tolist() == [35]
    fourth = again.patched(4, ["b.py"], [rows(30, 10, "b.py")], 0)
    if not held:  # the file waits for the reload
        assert fourth is None
        return
    # Memory is written anew by the patch: the live rows' vectors only, in row order.
    assert fourth is not None and fourth.exact is not matrix.exact and fourth.exact.rows == 40
    assert packed_vectors.slots(fourth.vectors, dim).tolist() == list(range(40))
    np.testing.assert_array_equal(fourth.exact_vectors(np.arange(40)),
                                  vectors[fourth.row_ids.astype(np.int64)])
    found, cosines = fourth.nearest(vectors[35], 3)
    assert fourth.row_ids[found[0]] == 35 and abs(cosines[0] - 1) < 1e-6
    assert again.vector_of(35).tolist() == vectors[35].tolist()  # the matrix before still reads


def test_a_copy_in_memory_is_outgrown_once_it_is_large_enough_for_a_file(monkeypatch):
    monkeypatch.setattr(packed_vectors, "FILE_MIN_ROWS", 100)
    assert isinstance(packed_vectors.exact_vectors_for(99, 4, None), HeldVectors)
    assert isinstance(packed_vectors.exact_vectors_for(100, 4, None), ExactVectors)
    held = HeldVectors(4)
    held.append(np.ones((90, 4), np.float32))
    assert not held.outgrown(90) and held.outgrown(100)


def test_a_search_keeps_the_vectors_it_took_while_more_are_appended():
    held = HeldVectors(2)
    held.append(np.array([[1, 0], [0, 1]], np.float32))
    taken = held.held()
    for _ in range(5):  # grows its array several times over
        held.append(np.full((40, 2), 7, np.float32))
    np.testing.assert_array_equal(taken, [[1, 0], [0, 1]])
    np.testing.assert_array_equal(held.read(np.array([201, 1])), [[7, 7], [0, 1]])
