"""Full-text lookups from memory (rag_lsp.store.term_index), alone and through a real store."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest

from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.store.term_index import TermIndex, TermIndexBuilder
from rag_lsp.store.vector_cache import VectorMatrix


def test_rarer_terms_and_shorter_chunks_rank_first():
    index = TermIndex.build(pa.chunked_array([
        ["retri backoff http", "http client", "http server"],
        ["http", "retri jitter sleep", None, ""],
    ]))
    rows, scores = index.search(["retri", "http"], 10)
    # Row 0 has both terms; 4 has the rarer one alone; 1, 2 and 3 only the common one, the
    # shortest (3) first, then 1 and 2 (a tie: the earlier row first).
    assert rows.tolist() == [0, 4, 3, 1, 2]
    assert list(scores) == sorted(scores, reverse=True) and len(index) == 7
    assert index.search(["retri", "http"], 2)[0].tolist() == [0, 4]
    assert index.search(["nowhere"], 10)[0].tolist() == []
    assert index.search(["http"], 0)[0].tolist() == []


def test_names_are_matched_whole_and_case_insensitively():
    names = TermIndex.build(pa.array(["ClientSession TCPConnector", "clientsession", "Session"]),
                            lower=True)
    assert names.search(["clientsession"], 5)[0].tolist() == [1, 0]
    assert names.search(["session"], 5)[0].tolist() == [2]


def test_a_term_counts_once_per_row():
    names = TermIndex.build(pa.array(["Session session SESSION other", "session"]), lower=True)
    assert names.rows.tolist().count(0) == 2  # "session" and "other", once each
    rows, scores = names.search(["session"], 5)
    assert rows.tolist() == [1, 0] and scores[0] > scores[1]  # the shorter row first


def test_ties_at_the_cut_keep_the_earlier_rows():
    index = TermIndex.build(pa.array(["x"] * 30))
    assert index.search(["x"], 4)[0].tolist() == [0, 1, 2, 3]


def test_too_many_distinct_terms_means_no_postings():
    builder = TermIndexBuilder(max_terms=5)
    builder.add(pa.array(["a b c", "d e f g"]))
    assert builder.overflowed
    builder.add(pa.array(["h i j"]))  # nothing more is held
    assert len(builder._vocabulary) == 7


def test_an_empty_column():
    index = TermIndex.build(pa.chunked_array([], pa.string()))
    assert len(index) == 0 and index.search(["x"], 3)[0].tolist() == []


@pytest.mark.parametrize("expected_rows", [0, 3, 32, 100_000])
def test_postings_built_in_batches_list_each_terms_rows_once_in_order(expected_rows):
    # Built batch by batch, some terms repeated within a row, numbered after another index's
    # vocabulary: each term's rows are those that have it, ascending, once each. Whatever
    # rows were expected (32 come): the keys' array outgrown or not.
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(40)]
    earlier = TermIndex.build(pa.array(["w3 w5", "old w39"]))
    builder = TermIndexBuilder(extending=earlier, expected_rows=expected_rows)
    rows: list[list[str]] = []
    for size in (5, 1, 0, 17, 9):
        batch = [" ".join(rng.choice(words, rng.integers(0, 12))) for _ in range(size)]
        rows += [row.split() for row in batch]
        builder.add(pa.array(batch, pa.string()))
    index = builder.finish()
    assert index.vocabulary["w3"] == earlier.vocabulary["w3"]  # the earlier numbering kept
    assert index.lengths.tolist() == [len(set(row)) for row in rows]
    for term, at in index.vocabulary.items():
        found = index.rows[index.starts[at]:index.starts[at + 1]].tolist()
        assert found == [n for n, row in enumerate(rows) if term in row], term
    assert index.starts[-1] == len(index.rows) == sum(len(set(row)) for row in rows)


FOLDERS = {7: "router", 3: "session", 9: "cache", 1: "misc"}


def test_the_matrix_builds_postings_when_its_batches_carry_the_words():
    vectors = np.eye(3, 4, dtype=np.float32)

    def batch(ids, rows, with_words):
        columns = [pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), 4),
                   pa.array(ids, pa.uint64())]
        names = ["vector", "_rowid"]
        if with_words:
            columns += [pa.array([f"word{i} common" for i in ids]),
                        pa.array([f"Name{i}" for i in ids]),
                        pa.array([f"pkg/{FOLDERS[i]}/mod.py" for i in ids])]
            names += ["terms", "defines", "path"]
        return pa.record_batch(columns, names=names)

    matrix = VectorMatrix.from_batches(
        1, [batch([7, 3], vectors[:2], True), batch([9], vectors[2:], True)], rows=3, dim=4)
    assert matrix.terms is not None and matrix.names is not None
    rows, _ = matrix.terms.search(["word9"], 5)
    assert matrix.row_ids[rows].tolist() == [9]
    rows, _ = matrix.names.search(["name3"], 5)
    assert matrix.row_ids[rows].tolist() == [3]
    rows, _ = matrix.terms.search(["router"], 5)  # its path's words
    assert matrix.row_ids[rows].tolist() == [7]
    plain = VectorMatrix.from_batches(1, [batch([1], vectors[:1], False)], rows=1, dim=4)
    assert plain.terms is None and plain.names is None


def test_a_store_answers_full_text_from_memory_once_its_vectors_are_loaded(workspace,
                                                                           monkeypatch):
    store = ChunkStore(workspace.index_dir, workspace.embedder.dimension)
    # A filter always goes to LanceDB: the answers to compare with.
    from_lancedb = store.text_search("redirects followed", 5, "true")
    by_name = store.text_search("follow_redirects", 5, "true", column="defines")
    assert from_lancedb and by_name
    store.text_search("redirects followed", 5)  # starts loading the vectors
    deadline = time.monotonic() + 60
    while (matrix := store.vectors_in_memory()) is None or matrix.terms is None:
        assert time.monotonic() < deadline, "the vectors never loaded into memory"
        time.sleep(0.02)

    def no_full_text_engine(*args, **kwargs):
        raise AssertionError("asked LanceDB's full-text index")

    real_search = store._chunks.search
    monkeypatch.setattr(store._chunks, "search", no_full_text_engine)
    rows = store.text_search("redirects followed", 5, terms=("redirect", "follow"))
    assert rows[0]["path"] == from_lancedb[0]["path"] == "src/http/client.py"
    assert all("_rowid" in r for r in rows)  # the rows too from memory
    assert all(r["vector"].shape == (workspace.embedder.dimension,) for r in rows)
    names = store.text_search("Follow_Redirects", 5, column="defines", with_vectors=False)
    assert [r["id"] for r in names] == [r["id"] for r in by_name]
    assert all("vector" not in r for r in names)
    # A filter is LanceDB's to apply.
    monkeypatch.setattr(store._chunks, "search", real_search)
    filtered = store.text_search("redirects followed", 5, "path = 'nowhere.py'")
    assert filtered == []


def test_a_copy_whose_postings_overflow_keeps_no_columns_that_lack_the_rows_terms(monkeypatch):
    """Rows read from memory take their terms from the postings. With none (too many distinct
    words) the columns go too, and searches read the rows from LanceDB; columns that hold each
    row's terms stay."""
    monkeypatch.setitem(TermIndexBuilder.__init__.__kwdefaults__, "max_terms", 2)
    batch = pa.record_batch(
        [pa.FixedSizeListArray.from_arrays(pa.array(np.eye(2, 4, dtype=np.float32).ravel()), 4),
         pa.array([4, 5], pa.uint64()), pa.array(["alpha beta", "gamma"]),
         pa.array(["Alpha", ""]), pa.array(["pkg/a.py", "pkg/b.py"])],
        names=["vector", "_rowid", "terms", "defines", "path"])
    without = VectorMatrix.from_batches(1, [batch], rows=2, dim=4,
                                        row_columns=["path", "defines"])
    assert without.terms is None and without.columns is None
    assert without.rows_at(np.array([0, 1]), ["alpha"]) is None
    holding = VectorMatrix.from_batches(1, [batch], rows=2, dim=4,
                                        row_columns=["path", "defines", "terms"])
    assert holding.terms is None
    assert [r["terms"] for r in holding.rows_at(np.array([1, 0]), ["alpha"])] == [
        "gamma", "alpha beta"]
