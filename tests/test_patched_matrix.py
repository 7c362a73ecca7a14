"""The in-memory copy after this process's own writes: patched with the changed files' rows,
not reloaded whole, and kept answering while the write runs (rag_lsp.store.vector_cache)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from rag_lsp.store.lance_store import ChunkStore, FileRecord
from rag_lsp.store.term_index import TermIndex, TermIndexBuilder
from rag_lsp.store.vector_cache import VectorCache, VectorMatrix

DIM = 8
WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()


def words(rng: np.random.Generator, rows: int, vocabulary: list[str]) -> list[str]:
    return [" ".join(rng.choice(vocabulary, size=rng.integers(0, 6))) for _ in range(rows)]


def same_answers(patched: TermIndex, fresh: TermIndex, queries: list[list[str]]) -> None:
    for terms in queries:
        rows, scores = patched.search(terms, 1000)
        want_rows, want_scores = fresh.search(terms, 1000)
        assert rows.tolist() == want_rows.tolist(), terms
        np.testing.assert_allclose(scores, want_scores, rtol=1e-5)


def test_patched_postings_answer_as_postings_built_from_scratch():
    rng = np.random.default_rng(11)
    old_words = words(rng, 60, WORDS)
    new_words = words(rng, 15, WORDS + ["fresh", "novel"])  # terms the old rows lacked
    old = TermIndex.build(pa.array(old_words))
    keep = rng.random(60) < 0.7
    builder = TermIndexBuilder(extending=old)
    builder.add(pa.array(new_words))
    patched = old.patched(keep, builder.finish())
    kept_words = [w for w, k in zip(old_words, keep, strict=True) if k]
    fresh = TermIndex.build(pa.array(kept_words + new_words))
    assert len(patched) == len(fresh) == int(keep.sum()) + 15
    queries = [[w] for w in WORDS + ["fresh", "novel", "absent"]] + [["alpha", "fresh"]]
    same_answers(patched, fresh, queries)
    assert old.search(["fresh"], 5)[0].tolist() == []  # the old index is left as it was


def postings_by_term(index: TermIndex) -> dict[str, list[int]]:
    """Each term's rows, in order (terms with none left out)."""
    found = {}
    for term, at in index.vocabulary.items():
        rows = index.rows[index.starts[at]:index.starts[at + 1]].tolist()
        if rows:
            found[term] = rows
    return found


@pytest.mark.parametrize("seed", range(8))
def test_patched_postings_are_those_built_from_scratch(seed):
    """Term by term, row by row, and each row's length: whatever share of the rows is
    kept (none, some, all) and whether or not rows are added."""
    rng = np.random.default_rng(seed)
    old_words = words(rng, int(rng.integers(0, 90)), WORDS)
    new_words = words(rng, int(rng.integers(0, 20)), WORDS + ["fresh", "novel"])
    old = TermIndex.build(pa.array(old_words, pa.string()))
    keep = rng.random(len(old_words)) < [0.0, 0.5, 0.95, 1.0][seed % 4]
    builder = TermIndexBuilder(extending=old)
    builder.add(pa.array(new_words, pa.string()))
    patched = old.patched(keep, builder.finish())
    kept_words = [w for w, k in zip(old_words, keep, strict=True) if k]
    fresh = TermIndex.build(pa.array(kept_words + new_words, pa.string()))
    assert postings_by_term(patched) == postings_by_term(fresh)
    np.testing.assert_array_equal(patched.lengths, fresh.lengths)
    np.testing.assert_allclose(patched.length_norm, fresh.length_norm, rtol=1e-6)


def test_nothing_kept_nothing_added_and_everything_removed():
    old = TermIndex.build(pa.array(["alpha beta", "beta"]))
    empty = TermIndexBuilder(extending=old).finish()
    none_left = old.patched(np.zeros(2, dtype=bool), empty)
    assert len(none_left) == 0 and none_left.search(["beta"], 5)[0].tolist() == []
    unchanged = old.patched(np.ones(2, dtype=bool), empty)
    same_answers(unchanged, old, [["alpha"], ["beta"]])


def rows_for(path: str, rng: np.random.Generator, count: int, tag: str) -> list[dict]:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [{"id": f"{path}#{n}", "path": path, "start_line": n + 1, "end_line": n + 1,
             "language": "python", "kind": "function", "symbol": f"{tag}{n}",
             "text": f"def {tag}{n}(): pass", "search_text": f"{tag}{n} pass",
             "defines": f"{tag.capitalize()}{n}", "terms": f"{tag} pass n{n}",
             "content_hash": f"{abs(hash((path, tag, n))):064x}", "vector": vector}
            for n, vector in enumerate(vectors)]


def record(path: str, chunks: int) -> FileRecord:
    return FileRecord(path, 1, 1, "0" * 64, chunks)


def by_row_id(matrix: VectorMatrix) -> dict[int, tuple]:
    assert matrix.columns is not None
    rows = matrix.columns.to_pylist()
    return {int(r): (matrix.vectors[at].tobytes(), rows[at])
            for at, r in enumerate(matrix.row_ids)}


def assert_same_matrix(patched: VectorMatrix, loaded: VectorMatrix) -> None:
    assert patched.version == loaded.version
    assert by_row_id(patched) == by_row_id(loaded)
    for row_id in loaded.row_ids[:5]:
        np.testing.assert_array_equal(patched.vector_of(int(row_id)),
                                      loaded.vector_of(int(row_id)))
    queries = [["alpha"], ["beta"], ["pass"], ["n1", "gamma"], ["lib"], ["zeta", "n0"]]
    for index in ("terms", "names"):
        mine, theirs = getattr(patched, index), getattr(loaded, index)
        assert mine is not None and theirs is not None
        for terms in queries + [["alpha1"], ["beta0"], ["gamma2"]]:
            rows, scores = mine.search(terms, 1000)
            want_rows, want_scores = theirs.search(terms, 1000)
            # Row numbers differ between the two; the rows they stand for must not.
            found = dict(zip(patched.row_ids[rows].tolist(), scores.tolist(), strict=True))
            want = dict(zip(loaded.row_ids[want_rows].tolist(), want_scores.tolist(),
                            strict=True))
            assert found.keys() == want.keys(), (index, terms)
            for row_id, score in want.items():
                assert found[row_id] == pytest.approx(score, rel=1e-5)


@pytest.fixture
def loaded(tmp_path):
    """A store with three files, its in-memory copy loaded."""
    rng = np.random.default_rng(5)
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    for path, tag in (("lib/a.py", "alpha"), ("lib/b.py", "beta"), ("lib/c.py", "gamma")):
        store.replace_files([record(path, 4)], rows_for(path, rng, 4, tag))
    store.ensure_fts_index()
    store._vectors._matrix = store._load_vectors()  # noqa: SLF001
    return store, rng


def held(store: ChunkStore) -> VectorMatrix | None:
    return store._vectors._matrix  # noqa: SLF001


@pytest.mark.parametrize("write", ["edit", "add", "remove", "rename", "compact"])
def test_own_writes_patch_the_copy_to_what_a_full_load_gives(loaded, write, monkeypatch):
    store, rng = loaded
    before = held(store)
    assert before is not None and before.version == store.version()
    if write == "edit":  # fewer chunks than before, other words
        store.replace_files([record("lib/b.py", 2)], rows_for("lib/b.py", rng, 2, "zeta"))
    elif write == "add":
        store.replace_files([record("lib/d.py", 3)], rows_for("lib/d.py", rng, 3, "delta"))
    elif write == "remove":
        store.remove_files(["lib/a.py"])
    elif write == "rename":
        store.replace_files([record("lib/e.py", 4)], rows_for("lib/e.py", rng, 4, "alpha"),
                            removed=["lib/a.py"])
    else:  # the rows move to other row ids (an edit first, so that there is something to do)
        store.replace_files([record("lib/b.py", 2)], rows_for("lib/b.py", rng, 2, "zeta"))
        moved = held(store).row_ids.copy()
        store.optimize()
        assert sorted(held(store).row_ids.tolist()) != sorted(moved.tolist())
    patched = held(store)
    assert patched is not None and patched is not before
    assert patched.version == store.version() > before.version
    assert_same_matrix(patched, store._load_vectors())  # noqa: SLF001

    def no_lancedb(*args, **kwargs):
        raise AssertionError("the search asked LanceDB")

    # Searches answer from the patched copy alone (no reload needed, none started).
    monkeypatch.setattr(store._chunks, "search", no_lancedb)  # noqa: SLF001
    target = patched.vectors[-1]
    assert store.vector_search(target, 1)[0]["id"] == patched.columns.column("id")[-1].as_py()
    assert store.text_search("pass", 50, with_vectors=False)
    assert not store._vectors._loading  # noqa: SLF001


def test_searches_during_the_write_get_the_copy_from_before_it(loaded):
    store, rng = loaded
    before = held(store)
    seen: list[VectorMatrix | None] = []
    patch = store._vectors.patch  # noqa: SLF001

    def search_then_patch(*args):
        # The write has committed; the copy is not patched yet.
        assert store.version() > before.version
        seen.append(store.vectors_in_memory())
        # A filtered full-text search asks LanceDB, which has the new rows: their vectors
        # come from LanceDB too, not from the copy of before (where they are not).
        filtered.extend(store.text_search("omega0", 5, "path = 'lib/c.py'"))
        patch(*args)

    filtered: list[dict] = []
    store._vectors.patch = search_then_patch  # noqa: SLF001
    new_rows = rows_for("lib/c.py", rng, 1, "omega")
    store.replace_files([record("lib/c.py", 1)], new_rows)
    assert seen == [before]
    assert [row["id"] for row in filtered] == ["lib/c.py#0"]
    np.testing.assert_array_equal(filtered[0]["vector"], new_rows[0]["vector"])
    assert store.vectors_in_memory() is held(store) and held(store).version == store.version()
    # Outside a write, a copy older than the table is never served.
    store._vectors._matrix = before  # noqa: SLF001
    assert store.vectors_in_memory() is None


def test_a_failed_patch_leaves_the_copy_stale_and_a_reload_catches_up(loaded, monkeypatch):
    store, rng = loaded
    before = held(store)

    def broken(*args):
        raise RuntimeError("simulated failure while patching")

    monkeypatch.setattr(VectorMatrix, "patched", broken)
    store.replace_files([record("lib/a.py", 2)], rows_for("lib/a.py", rng, 2, "sigma"))
    assert held(store) is before
    monkeypatch.undo()
    assert store.vectors_in_memory() is None  # stale: searches ask LanceDB, a reload starts
    assert store.vector_search(before.vectors[0], 1)
    store._vectors._last_attempt = float("-inf")  # noqa: SLF001
    deadline = time.monotonic() + 30
    while (matrix := store.vectors_in_memory()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert matrix is not None and matrix.version == store.version()


def test_a_copy_without_the_text_is_patched_but_not_served_during_a_write(loaded):
    store, rng = loaded
    before = held(store)
    assert before.columns is not None
    store._vectors._matrix = VectorMatrix(  # noqa: SLF001
        before.version, before.row_ids, before.vectors, before.sorted_ids, before.sorted_rows,
        before.terms, before.names, before.columns.drop_columns(["text"]))
    store._vectors._last_attempt = time.monotonic()  # no reload: the patch alone  # noqa: SLF001
    seen = []
    patch = store._vectors.patch  # noqa: SLF001
    store._vectors.patch = lambda *a: (seen.append(store.vectors_in_memory()), patch(*a))  # noqa: SLF001
    store.replace_files([record("lib/c.py", 1)], rows_for("lib/c.py", rng, 1, "omega"))
    assert seen == [None]
    after = held(store)
    assert after.version == store.version() and not after.holds_text


def test_a_reload_that_began_before_a_patch_does_not_bring_back_an_older_copy():
    older = VectorMatrix.from_batches(3, [], rows=0, dim=DIM)
    newer = VectorMatrix.from_batches(5, [], rows=0, dim=DIM)
    cache = VectorCache(lambda: older)
    cache._matrix = newer  # noqa: SLF001
    reload = threading.Thread(target=cache._reload)  # noqa: SLF001  (it lowers its thread)
    reload.start()
    reload.join()
    assert cache._matrix is newer  # noqa: SLF001
