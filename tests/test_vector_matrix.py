"""The in-memory vector matrix, loaded batch by batch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rag_lsp.store import vector_cache
from rag_lsp.store.lance_store import ChunkStore, FileRecord
from rag_lsp.store.vector_cache import ProcessEnding, VectorMatrix, while_process_runs
from tests.test_vector_index import rows_for

DIM = 8
ROOT = Path(__file__).resolve().parents[1]


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
    assert len(matrix.vectors) == 25 and matrix.version == 5
    for row_id, vector in zip(ids, vectors, strict=True):
        np.testing.assert_array_equal(matrix.vector_of(row_id), vector)
    assert matrix.vector_of(1) is None and matrix.vector_of(10**6) is None
    found, cosines = matrix.nearest(vectors[17], 3)
    assert matrix.row_ids[found[0]] == ids[17] and abs(float(cosines[0]) - 1.0) < 1e-6
    assert matrix.columns is None and matrix.rows_at(found) is None  # none asked to be kept


def test_fewer_rows_than_counted_and_none_at_all():
    rng = np.random.default_rng(4)
    matrix = VectorMatrix.from_batches(1, [batch([3, 4], unit(rng, 2))], rows=10, dim=DIM)
    assert len(matrix.vectors) == 2
    empty = VectorMatrix.from_batches(1, [], rows=0, dim=DIM)
    assert len(empty.nearest(unit(rng, 1)[0], 5)[0]) == 0 and empty.vector_of(3) is None


def with_columns(row_ids: list[int], vectors: np.ndarray,
                 kinds: list[str] | None) -> pa.RecordBatch:
    base = batch(row_ids, vectors)
    if kinds is None:
        return base
    return base.append_column("kind", pa.array(kinds)).append_column(
        "start_line", pa.array([10 * r for r in row_ids], pa.int32()))


def test_ranking_columns_are_kept_row_by_row_as_the_vectors():
    rng = np.random.default_rng(5)
    vectors = unit(rng, 6)
    ids = [50, 40, 30, 20, 10, 60]
    kinds = ["function", "class", "section", "text", "method", "function"]
    batches = [with_columns(ids[:4], vectors[:4], kinds[:4]),
               with_columns(ids[4:], vectors[4:], kinds[4:])]
    matrix = VectorMatrix.from_batches(2, batches, rows=6, dim=DIM,
                                       row_columns=["kind", "start_line"])
    assert matrix.columns is not None and matrix.columns.num_rows == 6
    found, _ = matrix.nearest(vectors[4], 2)
    rows = matrix.rows_at(found)
    assert rows is not None and rows[0] == {"kind": "method", "start_line": 100, "_rowid": 10}
    assert all(row["_rowid"] == matrix.row_ids[at] for row, at in zip(rows, found, strict=True))
    assert "text" not in rows[0]  # read for the chunks a search returns (ChunkStore.fill_text)


def test_text_is_kept_within_its_budget_and_dropped_whole_past_it():
    rng = np.random.default_rng(7)
    vectors = unit(rng, 5)
    texts = ["def a(): pass", "class B: ...", "x = 1", "# notes", "def e(): return 5"]

    def batches():
        return [with_columns([1, 2, 3], vectors[:3], ["function", "class", "text"])
                .append_column("text", pa.array(texts[:3])),
                with_columns([4, 5], vectors[3:], ["text", "function"])
                .append_column("text", pa.array(texts[3:]))]

    size = sum(len(t) for t in texts) + 4 * 7  # the characters and each row's offset
    held = VectorMatrix.from_batches(1, batches(), rows=5, dim=DIM, row_columns=["kind"],
                                     text_bytes=size)
    rows = held.rows_at(np.arange(5))
    assert [row["text"] for row in rows] == texts
    assert [row["kind"] for row in rows] == ["function", "class", "text", "text", "function"]
    # Over the budget in the second batch: no text at all (not the first batch's alone).
    over = VectorMatrix.from_batches(1, batches(), rows=5, dim=DIM, row_columns=["kind"],
                                     text_bytes=size - 10)
    assert over.columns.column_names == ["kind"]
    assert all("text" not in row for row in over.rows_at(np.arange(5)))


def test_no_columns_kept_when_a_batch_lacks_them():
    rng = np.random.default_rng(6)
    batches = [with_columns([1, 2], unit(rng, 2), ["function", "class"]),
               with_columns([3], unit(rng, 1), None)]
    matrix = VectorMatrix.from_batches(1, batches, rows=3, dim=DIM,
                                       row_columns=["kind", "start_line"])
    assert matrix.columns is None and matrix.rows_at(np.array([0])) is None


def test_the_process_waits_for_a_load_under_way_before_it_ends(tmp_path):
    """A client may exit right after a folder's warm-up started the load: the process lets
    the load finish (a thread inside LanceDB's reader at interpreter shutdown aborted it)."""
    done = tmp_path / "loaded"
    script = textwrap.dedent(f"""
        import pathlib, time
        from rag_lsp.store.vector_cache import VectorCache

        def load():
            time.sleep(0.5)
            pathlib.Path({str(done)!r}).write_text("done")

        VectorCache(load).current(1)  # starts the load, then the script ends at once
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, timeout=60)
    assert result.returncode == 0 and done.read_text() == "done"


def test_a_load_stops_at_its_next_batch_once_the_process_is_ending(tmp_path):
    """A one-shot search starts a load it will not use: the process ends after one more batch,
    not after the whole table (the reader stops between batches; the load is dropped
    quietly)."""
    progress = tmp_path / "batches"
    progress.write_text("0")
    script = textwrap.dedent(f"""
        import logging, pathlib, time
        from rag_lsp.store.vector_cache import VectorCache, while_process_runs

        logging.basicConfig(level=logging.DEBUG)

        def batches():
            for n in range(200):  # 10 s in all
                time.sleep(0.05)
                pathlib.Path({str(progress)!r}).write_text(str(n + 1))
                yield n

        cache = VectorCache(lambda: list(while_process_runs(batches())))
        cache.current(1)  # starts the load
        time.sleep(0.3)  # then the script ends
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, timeout=60,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # ~6 batches before the script ends, one more after; a slow machine reads fewer
    assert 1 <= int(progress.read_text()) < 40
    assert "Traceback" not in result.stderr, result.stderr
    assert "could not load" not in result.stderr, result.stderr  # not a failure: dropped


def test_while_process_runs_passes_every_batch_while_it_runs():
    assert list(while_process_runs(iter(range(5)))) == [0, 1, 2, 3, 4]
    assert list(while_process_runs([])) == []


def test_the_store_reads_its_vectors_through_the_shutdown_check(tmp_path, monkeypatch):
    """ChunkStore's load stops once the process is ending (see the test above)."""
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    vectors = np.eye(DIM, dtype=np.float32)[:3]
    store.replace_files([FileRecord("a.py", 1, 1, "0" * 64, 3)], rows_for("a.py", vectors))
    assert store._load_vectors() is not None  # noqa: SLF001
    monkeypatch.setattr(vector_cache, "shutting_down", lambda: True)
    with pytest.raises(ProcessEnding):
        store._load_vectors()  # noqa: SLF001


@pytest.mark.parametrize("page_rows", [4, 5, 64])
def test_the_store_loads_every_row_once_through_scans_of_a_page_each(tmp_path, monkeypatch,
                                                                      page_rows):
    """The load reads the table in scans of LOAD_PAGE_ROWS rows (a page that ends the table
    exactly, one that ends it part-way, one page for it all): every row comes once, with
    its own vector and columns."""
    from rag_lsp.store import lance_store
    monkeypatch.setattr(lance_store, "LOAD_PAGE_ROWS", page_rows)
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    rng = np.random.default_rng(11)
    vectors = {name: unit(rng, rows) for name, rows in (("a.py", 12), ("b.py", 8))}
    for name, held in vectors.items():
        store.replace_files([FileRecord(name, 1, 1, "0" * 64, len(held))],
                            rows_for(name, held))
    matrix = store._load_vectors()  # noqa: SLF001
    assert matrix is not None and len(matrix.row_ids) == 20
    assert len(set(matrix.row_ids.tolist())) == 20
    rows = matrix.rows_at(np.arange(20))
    assert rows is not None
    found = {(row["path"], row["start_line"]): matrix.exact_vectors([at])[0]
             for at, row in enumerate(rows)}
    stored = (store._chunks.search().select(["path", "start_line", "vector"])  # noqa: SLF001
              .limit(None).to_list())
    assert len(found) == len(stored) == 20
    for row in stored:
        np.testing.assert_array_equal(found[(row["path"], row["start_line"])], row["vector"])
