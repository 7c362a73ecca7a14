"""Past a size, nearest chunks come from an ANN index in LanceDB, not from a matrix in memory.

Real LanceDB; the threshold is lowered so that a few thousand rows make a "large" index.
Vectors are clustered (as real embeddings are) and unit length.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import pytest
from lancedb.index import IvfSq

from rag_lsp.store import lance_store, vector_index
from rag_lsp.store.lance_store import ChunkStore, FileRecord
from rag_lsp.store.retraining import Outcome
from rag_lsp.store.sql import in_list
from rag_lsp.store.vector_index import index_segments, trained_rows

DIM = 384
ROWS = 2_000


def clustered(rng: np.random.Generator, rows: int, centres: int = 40) -> np.ndarray:
    middle = rng.standard_normal((centres, DIM)).astype(np.float32)
    v = middle[rng.integers(0, centres, rows)] + 0.3 * rng.standard_normal(
        (rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rows_for(path: str, vectors: np.ndarray, first: int = 0) -> list[dict]:
    return [{"id": f"{path}#{first + n}", "path": path, "start_line": first + n + 1,
             "end_line": first + n + 1, "language": "python", "kind": "function",
             "symbol": f"f{first + n}", "text": f"def f{first + n}(): pass",
             "search_text": f"f{first + n}", "defines": f"f{first + n}", "terms": "pass",
             "content_hash": f"{first + n:064x}", "vector": vector}
            for n, vector in enumerate(vectors)]


def filled_store(index_dir, rng: np.random.Generator) -> tuple[ChunkStore, np.ndarray]:
    """A new store of ROWS chunks in 20 files of 100, written file by file; its vectors."""
    vectors = clustered(rng, ROWS)
    store = ChunkStore(index_dir, DIM, create=True)
    per_file = 100
    for start in range(0, ROWS, per_file):
        path = f"pkg/m{start // per_file}.py"
        store.replace_files([FileRecord(path, 1, 1, "0" * 64, per_file)],
                            rows_for(path, vectors[start:start + per_file], start))
    return store, vectors


@pytest.fixture
def large_store(tmp_path, monkeypatch):
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS // 2)
    rng = np.random.default_rng(7)
    store, vectors = filled_store(tmp_path / "ix", rng)
    return store, vectors, rng


def exact_ids(vectors: np.ndarray, query: np.ndarray, limit: int) -> list[str]:
    order = np.argsort(-(vectors @ query))[:limit]
    return [f"pkg/m{i // 100}.py#{i}" for i in order]


def test_the_training_and_the_compaction_after_it_run_in_a_child_inside_the_callers_context(
        large_store, monkeypatch):
    """The steps that rewrite every row run in a child process (rag_lsp.store.retraining),
    inside ``around_rewrite`` (the workspace sets the model's bulk session aside there); the
    compaction before them, and an optimize with nothing to train, run here, outside it."""
    store, _vectors, _rng = large_store
    steps: list[str] = []
    real_child, real_compact = lance_store.retrain_in_child, ChunkStore._compact  # noqa: SLF001
    monkeypatch.setattr(lance_store, "retrain_in_child",
                        lambda *args: steps.append("child") or real_child(*args))
    monkeypatch.setattr(lance_store, "build_vector_index",
                        lambda table, rows: steps.append("trained here"))
    monkeypatch.setattr(ChunkStore, "_compact",
                        lambda self: steps.append("compact") or real_compact(self))

    @contextmanager
    def around_rewrite():
        steps.append("set aside")
        yield
        steps.append("back")

    store.optimize(around_rewrite)
    assert steps == ["compact", "set aside", "child", "back"]
    assert trained_rows(store._chunks) == ROWS  # noqa: SLF001 (the child's version, seen here)
    assert store._chunks.stats()["fragment_stats"]["num_fragments"] == 1  # noqa: SLF001
    steps.clear()
    store.optimize(around_rewrite)
    assert steps == ["compact"]


def test_past_the_size_optimize_builds_the_index_and_searches_use_it(large_store):
    store, vectors, rng = large_store
    assert trained_rows(store._chunks) is None and store.needs_vector_index()  # noqa: SLF001
    assert not store.large()
    store.optimize()
    assert trained_rows(store._chunks) == ROWS and not store.needs_vector_index()  # noqa: SLF001
    assert index_types(store) == ["IvfRq"]
    assert store.large()
    assert store.vectors_in_memory() is None  # no matrix is loaded for a large index
    time.sleep(0.3)
    assert store._vectors._matrix is None  # noqa: SLF001 (nor loading in the background)
    recalls = []
    by_id = {f"pkg/m{i // 100}.py#{i}": i for i in range(ROWS)}
    for _ in range(20):
        query = vectors[rng.integers(0, ROWS)] + 0.3 * rng.standard_normal(DIM)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        found = store.vector_search(query, 10)
        for row in found:  # the index only picks candidates: cosines are exact
            assert row["cosine"] == pytest.approx(float(vectors[by_id[row["id"]]] @ query),
                                                  abs=1e-5)
        assert [r["cosine"] for r in found] == sorted((r["cosine"] for r in found),
                                                      reverse=True)
        recalls.append(len({r["id"] for r in found} & set(exact_ids(vectors, query, 10))) / 10)
    # These clustered vectors are near ties (cosine ~0.92 within a cluster), harder than real
    # embeddings: over 100 builds of the index (its rotation is random) the mean was 0.93 at
    # least; the exact 10 of real chunks are all found (bench/README.md, "An index of half
    # the size").
    assert np.mean(recalls) >= 0.9


def index_types(store: ChunkStore) -> list[str]:
    return [index.index_type for index in store._chunks.list_indices()  # noqa: SLF001
            if tuple(index.columns) == ("vector",)]


def test_an_index_of_the_older_kind_answers_until_the_next_optimize_trains_this_kind(
        large_store):
    """An index an older rag-lsp built (8-bit scalar quantisation): searches use it, with
    exact cosines, and the next optimize, which runs even when nothing changed, trains this
    kind in its place (in the child past the size)."""
    store, vectors, rng = large_store
    older_index(store, rows=ROWS - 100)  # another name than the new one's: dropped after
    assert index_types(store) == ["IvfSq"] and store.large()
    by_id = {f"pkg/m{i // 100}.py#{i}": i for i in range(ROWS)}
    query = clustered(rng, 1)[0]
    found = store.vector_search(query, 10)
    assert [r["id"] for r in found] == exact_ids(vectors, query, 10)
    for row in found:
        assert row["cosine"] == pytest.approx(float(vectors[by_id[row["id"]]] @ query),
                                              abs=1e-5)
    assert store.needs_vector_index() and store.needs_optimize()
    store.optimize()
    assert index_types(store) == ["IvfRq"] and trained_rows(store._chunks) == ROWS  # noqa: SLF001
    assert not store.needs_vector_index() and not store.needs_optimize()
    found = store.vector_search(vectors[123], 10)  # a stored chunk's own vector: itself first
    assert found[0]["id"] == "pkg/m1.py#123" and found[0]["cosine"] == pytest.approx(1.0)
    recalls = []
    for query in clustered(rng, 10):  # near ties, as above: over 100 builds 0.90 at least
        found = store.vector_search(query, 10)
        recalls.append(len({r["id"] for r in found} & set(exact_ids(vectors, query, 10))) / 10)
    assert np.mean(recalls) >= 0.85


def older_index(store: ChunkStore, rows: int) -> None:
    """The index an older rag-lsp built, as it named it."""
    store._chunks.create_index("vector", name=f"vector_idx_{rows}",  # noqa: SLF001
                               config=IvfSq(distance_type="cosine"))


def test_an_index_of_the_older_kind_is_replaced_here_when_the_child_fails(large_store,
                                                                          monkeypatch):
    """If the retraining's child fails before it trained (it could not start, say), the
    steps run in this process: the older kind is not taken for a trained index."""
    store, _vectors, _rng = large_store
    older_index(store, rows=ROWS)  # the rows it was trained on are the rows there are
    monkeypatch.setattr(lance_store, "retrain_in_child", lambda *_: Outcome.FAILED)
    store.optimize()
    assert index_types(store) == ["IvfRq"] and not store.needs_vector_index()


def test_rows_written_after_the_index_are_found_before_optimize(large_store):
    store, vectors, rng = large_store
    store.optimize()
    target = clustered(rng, 1)
    store.replace_files([FileRecord("pkg/new.py", 1, 1, "1" * 64, 1)],
                        rows_for("pkg/new.py", target, ROWS))
    found = store.vector_search(target[0], 5)
    assert found[0]["id"] == f"pkg/new.py#{ROWS}"
    assert found[0]["cosine"] == pytest.approx(1.0, abs=1e-5)


def test_below_the_size_the_matrix_answers_again(large_store, monkeypatch):
    store, vectors, rng = large_store
    store.optimize()
    assert store.vectors_in_memory() is None
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS * 2)
    store.replace_files([FileRecord("pkg/m0.py", 1, 2, "2" * 64, 0)], [])  # a new version
    deadline = time.monotonic() + 30
    while (matrix := store.vectors_in_memory()) is None:  # loads in the background
        assert time.monotonic() < deadline, "the matrix did not load"
        time.sleep(0.05)
    assert len(matrix.row_ids) == ROWS - 100


def test_a_narrow_filter_still_gets_its_nearest_rows(large_store):
    """A filtered search (a few files of many) returns the rows an exact search returns
    (nearly all of them: these vectors are near ties, see above; over 100 builds of the index
    0.996 at least), nearest first, with their exact cosines. (LanceDB probes more partitions
    when a filter leaves too few rows in the first ones; a table this small has too few
    partitions to show it.)"""
    store, vectors, rng = large_store
    store.optimize()
    paths = [f"pkg/m{n}.py" for n in (3, 11)]  # 200 of 2,000 rows
    by_id = {f"pkg/m{i // 100}.py#{i}": i for i in range(ROWS)}
    recalls = []
    for _ in range(5):
        query = clustered(rng, 1)[0]
        found = store.vector_search(query, 50, in_list("path", paths))
        assert len(found) == 50 and {r["path"] for r in found} <= set(paths)
        ranked = [r["cosine"] for r in found]
        assert ranked == pytest.approx([float(vectors[by_id[r["id"]]] @ query) for r in found],
                                       abs=1e-5)
        assert ranked == sorted(ranked, reverse=True)
        allowed = [i for i in range(ROWS) if f"pkg/m{i // 100}.py" in paths]
        exact = sorted(allowed, key=lambda i: -float(vectors[i] @ query))[:50]
        recalls.append(len({r["id"] for r in found} & {f"pkg/m{i // 100}.py#{i}"
                                                         for i in exact}) / 50)
    assert np.mean(recalls) >= 0.95


def test_the_index_is_trained_again_once_the_table_has_doubled(large_store):
    """Partitions trained on the first rows of a long first index would leave the rest
    piled into a few of them: past twice the rows it was trained on, the index is rebuilt
    (one index on the vectors at a time)."""
    store, vectors, rng = large_store
    store.optimize()
    more = clustered(rng, ROWS + 100)
    for start in range(0, len(more), 700):
        path = f"pkg/more{start}.py"
        store.replace_files([FileRecord(path, 1, 1, "3" * 64, 700)],
                            rows_for(path, more[start:start + 700], ROWS + start))
        if start == 0:  # below twice the rows: folded in, not trained again
            store.optimize()
            assert trained_rows(store._chunks) == ROWS  # noqa: SLF001
    assert store.needs_vector_index()
    store.optimize()
    indexes = [i for i in store._chunks.list_indices() if i.columns == ["vector"]]  # noqa: SLF001
    assert [i.name for i in indexes] == [f"vector_idx_{2 * ROWS + 100}"]
    found = store.vector_search(more[-1], 1)
    assert found[0]["id"] == f"pkg/more1400.py#{2 * ROWS + 99}"


def fragments(store: ChunkStore) -> int:
    return store._chunks.stats()["fragment_stats"]["num_fragments"]  # noqa: SLF001


def edit_and_optimize(store: ChunkStore, rng: np.random.Generator, edit: int) -> np.ndarray:
    """A file's chunks replaced and the burst settled; its new vectors."""
    path = f"pkg/m{edit % 20}.py"
    fresh = clustered(rng, 100)
    store.replace_files([FileRecord(path, 2, 2, f"{edit % 10}" * 64, 100)],
                        rows_for(path, fresh, (edit % 20) * 100))
    store.optimize()
    return fresh


def test_segments_left_by_edits_are_merged_past_the_limit(large_store, monkeypatch):
    """Each optimize after a write folds the new rows into a segment of their own, and a
    query searches every segment (slower with each: see rag_lsp.store.vector_index). Past
    MAX_SEGMENTS the index is trained again, as one segment, and still finds every row."""
    monkeypatch.setattr(vector_index, "MAX_SEGMENTS", 3)
    store, vectors, rng = large_store
    store.optimize()
    assert index_segments(store._chunks) == 1  # noqa: SLF001
    seen = []
    for edit in range(5):
        fresh = edit_and_optimize(store, rng, edit)
        seen.append((index_segments(store._chunks), fragments(store)))  # noqa: SLF001
        found = store.vector_search(fresh[7], 1)
        assert found[0]["id"] == f"pkg/m{edit}.py#{edit * 100 + 7}"
        assert found[0]["cosine"] == pytest.approx(1.0, abs=1e-5)
    # (segments, fragments): 2, 3, then a fourth segment is one too many: trained again
    # (its rows included), and the fragments the segments kept apart are merged
    assert seen == [(2, 2), (3, 3), (1, 1), (2, 2), (3, 3)]
    assert trained_rows(store._chunks) == ROWS  # noqa: SLF001 (the count was the same)


def test_an_index_left_in_too_many_segments_is_merged_by_the_next_run(large_store,
                                                                      monkeypatch):
    """An index an older rag-lsp left in many segments: the next run's optimize, which
    runs even when nothing changed (see Indexer._finish), trains it again."""
    monkeypatch.setattr(vector_index, "MAX_SEGMENTS", 10)
    store, vectors, rng = large_store
    store.optimize()
    for edit in range(5):
        edit_and_optimize(store, rng, edit)
    assert index_segments(store._chunks) == 6  # noqa: SLF001
    assert not store.needs_vector_index()
    monkeypatch.setattr(vector_index, "MAX_SEGMENTS", 3)
    assert store.needs_vector_index() and store.needs_optimize()
    store.optimize()
    assert index_segments(store._chunks) == 1  # noqa: SLF001
    assert not store.needs_optimize()


def test_an_optimize_asked_for_one_segment_trains_again_below_the_limit(large_store,
                                                                        monkeypatch):
    """A run that folded batches of its own ends with its index in one segment
    (Indexer._finish asks for it): below MAX_SEGMENTS, not trained by default, trained when
    asked, and still finds every row. Not in a table below MATRIX_MAX_ROWS, where only
    filtered searches use the index."""
    store, vectors, rng = large_store
    store.optimize()
    fresh = [edit_and_optimize(store, rng, edit) for edit in range(2)]
    assert index_segments(store._chunks) == 3 < vector_index.MAX_SEGMENTS  # noqa: SLF001
    assert not store.needs_vector_index() and store.needs_vector_index(max_segments=1)
    assert store.needs_vector_index(max_segments=3) is False
    with monkeypatch.context() as below:
        below.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS * 2)  # the table shrank below it
        assert not store.needs_vector_index(max_segments=1)
    times = store.optimize(max_segments=1)
    assert times.training_seconds is not None
    assert index_segments(store._chunks) == 1  # noqa: SLF001
    assert not store.needs_vector_index(max_segments=1)
    for edit, vectors_of_edit in enumerate(fresh):
        found = store.vector_search(vectors_of_edit[5], 1)
        assert found[0]["id"] == f"pkg/m{edit}.py#{edit * 100 + 5}"
    assert store.optimize(max_segments=1).training_seconds is None  # one already


def test_an_index_below_the_size_keeps_few_segments(large_store, monkeypatch):
    """A table that shrank below the size keeps its index (filtered searches use it): edits
    must not pile up segments there either, nor leave every later run an optimize that can
    merge nothing (the fragments follow the segments)."""
    monkeypatch.setattr(vector_index, "MAX_SEGMENTS", 3)
    store, vectors, rng = large_store
    store.optimize()
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS * 2)  # now below the size
    seen = []
    for edit in range(12):
        fresh = edit_and_optimize(store, rng, edit)
        seen.append(index_segments(store._chunks))  # noqa: SLF001
        paths = [f"pkg/m{edit % 20}.py"]
        found = store.vector_search(fresh[3], 1, in_list("path", paths))  # through the index
        assert found[0]["id"] == f"pkg/m{edit % 20}.py#{(edit % 20) * 100 + 3}"
    assert max(seen) <= 3 and fragments(store) <= 3
    assert not store.needs_optimize()
