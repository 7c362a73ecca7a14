"""The in-memory copy after this process's own writes: patched with the changed files' rows,
not reloaded whole, and kept answering while the write runs (rag_lsp.store.vector_cache)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from rag_lsp.store import packed_vectors, vector_cache, vector_index
from rag_lsp.store.lance_store import ChunkStore, FileRecord
from rag_lsp.store.term_index import TermIndex, TermIndexBuilder
from rag_lsp.store.vector_cache import (
    DEAD_SHARE_MAX,
    SETTLE_SHARE_MIN,
    VectorCache,
    VectorMatrix,
)
from rag_lsp.terms import path_terms

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
    """Each live row's exact vector, its codes and columns (rows a patch masked out left
    out; the codes' slot in the file of exact vectors is where the patches put it)."""
    assert matrix.columns is not None
    rows = matrix.columns.to_pylist()
    assert len(rows) == len(matrix.row_ids) == len(matrix.vectors)
    codes = matrix.vectors[:, :matrix.dim]
    return {int(r): (matrix.exact_vectors([at])[0].tobytes(), codes[at].tobytes(), rows[at])
            for at, r in enumerate(matrix.row_ids)
            if matrix.alive is None or matrix.alive[at]}


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


@pytest.mark.parametrize("write", ["edit", "add", "remove", "rename", "compact",
                                   "compact in a child"])
def test_own_writes_patch_the_copy_to_what_a_full_load_gives(loaded, write, monkeypatch):
    store, rng = loaded
    if write == "compact in a child":  # as past the size, where another process compacts
        monkeypatch.setattr(vector_index, "COMPACT_IN_CHILD_MIN_ROWS", 1)
        monkeypatch.setattr(ChunkStore, "_compact",
                            lambda self: pytest.fail("compacted in the test's process"))
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
        # (in a child: the store learns of them only from the table's new version)
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
    for table in (store._chunks, store._view):  # noqa: SLF001 - the writer's and the reads'
        monkeypatch.setattr(table, "search", no_lancedb)
    target = patched.exact_vectors([-1])[0]
    def no_rows_read_back(*args, **kwargs):
        raise AssertionError("rows were read back from LanceDB")

    monkeypatch.setattr(store._view, "take_row_ids", no_rows_read_back)  # noqa: SLF001
    nearest = store.vector_search(target, 1, terms=("pass",))
    assert nearest[0]["id"] == patched.columns.column("id")[-1].as_py()
    assert store.text_search("pass", 50, with_vectors=False, terms=("pass",))
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
        # A search that names no words reads whole rows back by the copy's row ids: the
        # replaced file's are gone, so it asks LanceDB rather than answer short.
        whole.extend(store.vector_search(replaced, 3))
        patch(*args)

    filtered: list[dict] = []
    whole: list[dict] = []
    ids = before.columns.column("id").to_pylist()
    replaced = before.exact_vectors([ids.index("lib/c.py#0")])[0]
    store._vectors.patch = search_then_patch  # noqa: SLF001
    new_rows = rows_for("lib/c.py", rng, 1, "omega")
    store.replace_files([record("lib/c.py", 1)], new_rows)
    assert seen == [before]
    assert [row["id"] for row in filtered] == ["lib/c.py#0"]
    np.testing.assert_array_equal(filtered[0]["vector"], new_rows[0]["vector"])
    stored = {row["id"]: row["terms"] for row in store.chunk_rows("true", ["id", "terms"])}
    assert len(whole) == 3 and all(row["terms"] == stored[row["id"]] for row in whole)
    assert not any(row["terms"].startswith("gamma") for row in whole)  # none of before
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
    assert store.vector_search(before.exact_vectors([0])[0], 1)
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
        before.terms, before.names, before.columns.drop_columns(["text"]), exact=before.exact)
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


# ---- a run of patches, each checked against the matrix a load of the same rows gives ----

PATH_WORDS = "alpha beta gamma delta epsilon zeta theta kappa".split()


# Vectors that several chunks share (the same boilerplate in many files): exact ties.
SHARED = np.eye(DIM, dtype=np.float32)[:2]


def chunk_rows(rng: np.random.Generator, path: str, count: int, first_id: int) -> list[dict]:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for n in np.flatnonzero(rng.random(count) < 0.3):
        vectors[n] = SHARED[n % 2]
    return [{"_rowid": first_id + n, "vector": vectors[n], "path": path,
             "id": f"{path}#{first_id + n}", "kind": "function",
             "terms": " ".join(rng.choice(PATH_WORDS + ["rare", "novel"], size=rng.integers(0, 5))),
             "defines": " ".join(rng.choice(["Alpha", "beta", "Gamma"], size=rng.integers(0, 2))),
             "text": f"text of {first_id + n}"} for n in range(count)]


def as_batch(rows: list[dict]) -> pa.RecordBatch:
    flat = np.concatenate([r["vector"] for r in rows]) if rows else np.empty(0, np.float32)
    columns = {"vector": pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), DIM),
               "_rowid": pa.array([r["_rowid"] for r in rows], pa.uint64())}
    for name in ("path", "id", "kind", "terms", "defines", "text"):
        columns[name] = pa.array([r[name] for r in rows], pa.string())
    return pa.record_batch(list(columns.values()), names=list(columns))


# As the store keeps them: each row's terms come from the postings (see rows_at), for the
# words a search asks about.
KEPT = ["path", "id", "kind", "defines"]
ASKED = PATH_WORDS + ["rare", "novel", "absent", "py"]


def assert_answers_as_loaded(patched: VectorMatrix, rows: list[dict],
                             rng: np.random.Generator) -> None:
    """Everything a search asks of ``patched`` is what a load of ``rows`` (the live rows,
    in the order the patches left them) gives: same rows, same order, same scores."""
    fresh = VectorMatrix.from_batches(patched.version, [as_batch(rows)], len(rows), DIM, KEPT,
                                      10**6)
    assert patched.live_rows == len(rows)
    ids = [r["_rowid"] for r in rows]
    for query in [r["vector"] for r in rows[:3]] + list(SHARED) + list(
            rng.standard_normal((3, DIM))):
        query = (query / np.linalg.norm(query)).astype(np.float32)
        for limit in (1, 5, len(rows) + 3):
            mine, cosines = patched.nearest(query, limit)
            theirs, want = fresh.nearest(query, limit)
            assert patched.row_ids[mine].tolist() == fresh.row_ids[theirs].tolist()
            # (a product over more rows may round its last bit differently)
            np.testing.assert_allclose(cosines, want, rtol=0, atol=1e-6)
            assert patched.rows_at(mine, ASKED) == fresh.rows_at(theirs, ASKED)
    by_id = {r["_rowid"]: r for r in rows}
    for row in fresh.rows_at(np.arange(len(rows)), ASKED):  # its own terms and path's
        own = set(by_id[row["_rowid"]]["terms"].split()) | set(path_terms(row["path"]))
        assert row["terms"] == " ".join(w for w in ASKED if w in own)
    for index, queries in (("terms", [[w] for w in PATH_WORDS + ["rare", "novel", "absent"]]
                            + [["alpha", "novel"], ["beta", "gamma", "rare"]]),
                           ("names", [["alpha"], ["beta"], ["gamma", "alpha"]])):
        for terms in queries:
            mine, scores = getattr(patched, index).search(terms, 1000)
            theirs, want = getattr(fresh, index).search(terms, 1000)
            assert patched.row_ids[mine].tolist() == fresh.row_ids[theirs].tolist(), terms
            np.testing.assert_array_equal(scores, want)
    for row in rows:
        np.testing.assert_array_equal(patched.vector_of(row["_rowid"]), row["vector"])
    gone = set(patched.row_ids.tolist()) - set(ids)
    assert all(patched.vector_of(row_id) is None for row_id in gone)


def everything_found(matrix: VectorMatrix) -> list:
    """All a search could read of ``matrix``: each query's rows, scores and columns."""
    found = []
    for query in SHARED:
        positions, cosines = matrix.nearest(query, 1000)
        found.append((cosines.tolist(), matrix.rows_at(positions, ASKED)))
    for index, terms in (("terms", ["alpha"]), ("terms", ["novel", "beta"]),
                         ("names", ["gamma"])):
        positions, scores = getattr(matrix, index).search(terms, 1000)
        found.append((scores.tolist(), matrix.rows_at(positions, ASKED)))
    return found


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_a_run_of_patches_answers_as_a_load_of_the_same_rows(seed, in_place, monkeypatch):
    """Rows appended and masked out, or one compact copy past DEAD_SHARE_MAX: either way
    each patched matrix answers as a fresh load; both ways happen in each run."""
    monkeypatch.setattr(vector_cache, "ROOM_MIN_ROWS", 0)  # rooms of these few rows' size
    rng = np.random.default_rng(100 + seed)
    paths = [f"src/m{n}.py" for n in range(12)]
    next_id = 0
    rows: list[dict] = []
    for path in paths:
        rows += chunk_rows(rng, path, int(rng.integers(1, 5)), next_id)
        next_id += 10
    matrix = VectorMatrix.from_batches(1, [as_batch(rows)], len(rows), DIM, KEPT, 10**6)
    ways = set()
    for version in range(2, 26):
        changed = sorted(set(rng.choice(paths + ["src/new.py"], size=rng.integers(1, 3))))
        written = []
        for path in changed:
            if rng.random() < 0.8:  # else the file was deleted
                written += chunk_rows(rng, path, int(rng.integers(0, 4)), next_id)
                next_id += 10
        held = matrix.vectors.copy(), everything_found(matrix)
        patched = matrix.patched(version, changed, [as_batch(written)], 10**6,
                                 in_place=in_place)
        assert patched is not None
        # A search holding the matrix from before the patch sees it unchanged, but for a
        # compaction in place, once its move is done (the store's searches retry then).
        np.testing.assert_array_equal(matrix.vectors, held[0])
        assert everything_found(matrix) == held[1]
        if patched.pending_move is not None:
            assert patched.alive is None and patched.room is matrix.room
            patched = patched.settled()
            assert np.shares_memory(patched.vectors, matrix.vectors)
            ways.add("compacted in place")
        else:
            ways.add("appended" if patched.alive is not None else "compacted")
        assert patched.columns.column(0).num_chunks <= 2  # the load's rows, the appended
        assert patched.appended_rows <= DEAD_SHARE_MAX * len(patched.row_ids)
        rows = [r for r in rows if r["path"] not in changed] + written
        assert_answers_as_loaded(patched, rows, rng)
        matrix = patched
    if in_place:  # (and copies where the live rows would nearly fill or half empty it)
        assert {"appended", "compacted in place"} <= ways
    else:
        assert ways == {"appended", "compacted"}


@pytest.mark.parametrize("exact", ["held in memory", "in a file"])
@pytest.mark.parametrize("seed", range(4))
def test_a_compact_copy_of_a_patched_matrix_answers_as_a_load_with_nothing_left_over(
        seed, exact, monkeypatch):
    """What patches leave (rows masked out, rows appended in a second piece, replaced rows'
    vectors held in memory and still scored) is gone from the compact copy made once writes
    settle, and it answers as a load of the same rows. Vectors held in memory are copied,
    the matrix it was made from left answering as before; with the exact vectors in a file
    the codes move in place within their room."""
    monkeypatch.setattr(vector_cache, "ROOM_MIN_ROWS", 0)
    if exact == "in a file":
        monkeypatch.setattr(packed_vectors, "FILE_MIN_ROWS", 1)
    rng = np.random.default_rng(300 + seed)
    paths = [f"src/m{n}.py" for n in range(12)]
    rows: list[dict] = []
    for n, path in enumerate(paths):
        rows += chunk_rows(rng, path, int(rng.integers(2, 5)), 10 * n)
    matrix = VectorMatrix.from_batches(1, [as_batch(rows)], len(rows), DIM, KEPT, 10**6)
    assert matrix.unsettled_share == 0  # a load: nothing to make compact
    changed = sorted(set(rng.choice(paths, size=2, replace=False)))
    written = chunk_rows(rng, changed[0], 2, 500)
    patched = matrix.patched(2, changed, [as_batch(written)], 10**6, in_place=True)
    assert patched is not None and patched.alive is not None and patched.appended_rows == 2
    assert patched.unsettled_share >= SETTLE_SHARE_MIN
    rows = [r for r in rows if r["path"] not in changed] + written
    before = everything_found(patched)
    copy = patched.compacted_copy(10**6)
    assert copy is not None and copy.version == patched.version
    if exact == "held in memory":
        assert patched.exact.rows > patched.live_rows and copy.pending_move is None
        assert everything_found(patched) == before  # searches holding it see no change
        assert copy.exact.rows == len(rows)  # the replaced rows' vectors left behind
    else:
        assert copy.pending_move is not None and copy.room is patched.room
        copy = copy.settled()
    assert copy.unsettled_share == 0
    assert copy.alive is None and copy.appended_rows == 0
    assert copy.columns.column(0).num_chunks == 1
    assert_answers_as_loaded(copy, rows, rng)
    # Patches after it append as after a load.
    again = copy.patched(3, [paths[-1]], [as_batch(chunk_rows(rng, paths[-1], 1, 900))], 10**6)
    assert again is not None and again.room is copy.room and again.appended_rows == 1


def test_writes_settled_make_the_stores_copy_compact_in_the_same_version(loaded, monkeypatch):
    store, rng = loaded
    assert not store.settle_copy()  # as loaded: nothing to do
    store.replace_files([record("lib/b.py", 2)], rows_for("lib/b.py", rng, 2, "zeta"))
    patched = held(store)
    assert patched is not None and patched.unsettled_share >= SETTLE_SHARE_MIN
    version = store.version()
    # Less left over than the share worth a copy: left as it is.
    monkeypatch.setattr(vector_cache, "SETTLE_SHARE_MIN", patched.unsettled_share + 0.01)
    assert not store.settle_copy() and held(store) is patched
    monkeypatch.setattr(vector_cache, "SETTLE_SHARE_MIN", SETTLE_SHARE_MIN)
    assert store.settle_copy()
    settled = held(store)
    assert settled is not patched and settled.unsettled_share == 0
    assert settled.version == store.version() == version  # the table did not change
    assert_same_matrix(settled, store._load_vectors())  # noqa: SLF001
    assert not store.settle_copy()
    # A copy that cannot be made leaves the patched one answering, as a failed patch does.
    store.replace_files([record("lib/c.py", 1)], rows_for("lib/c.py", rng, 1, "kappa"))
    patched = held(store)
    monkeypatch.setattr(VectorMatrix, "compacted_copy",
                        lambda self, text_bytes: (_ for _ in ()).throw(MemoryError("no room")))
    assert not store.settle_copy()
    assert held(store) is patched


def test_a_copy_of_an_older_version_or_a_failed_move_is_not_settled(loaded, monkeypatch):
    """A copy another process's write left behind waits for its reload; a move in place cut
    short drops the copy (searches ask LanceDB until a reload), and says it did not settle."""
    store, rng = loaded
    store.replace_files([record("lib/b.py", 2)], rows_for("lib/b.py", rng, 2, "zeta"))
    patched = held(store)
    cache = store._vectors  # noqa: SLF001
    assert not cache.settle(patched.version - 1, 10**6) and held(store) is patched
    # The exact vectors in a file: the codes move in place, and here the move fails.
    monkeypatch.setattr(packed_vectors, "FILE_MIN_ROWS", 1)
    in_place_ready(store, monkeypatch)
    store.replace_files([record("lib/b.py", 2)], rows_for("lib/b.py", rng, 2, "theta"))
    assert held(store).unsettled_share >= SETTLE_SHARE_MIN

    def failing_move(*args):
        def move():
            raise MemoryError("simulated: the move cut short")
        return move

    monkeypatch.setattr(vector_cache, "_mover", failing_move)
    assert not store.settle_copy()
    assert held(store) is None and cache._moves % 2 == 0  # noqa: SLF001


def test_appended_rows_go_into_the_room_after_the_vectors():
    rng = np.random.default_rng(7)
    rows = chunk_rows(rng, "a.py", 40, 0)
    matrix = VectorMatrix.from_batches(1, [as_batch(rows)], 40, DIM, KEPT, 10**6)
    first = matrix.patched(2, ["b.py"], [as_batch(chunk_rows(rng, "b.py", 2, 100))], 10**6)
    second = first.patched(3, ["c.py"], [as_batch(chunk_rows(rng, "c.py", 2, 200))], 10**6)
    assert first.room is not None and second.room is first.room  # no new copy
    assert len(first.vectors) == 42 and len(second.vectors) == 44
    assert np.shares_memory(second.vectors, first.vectors)
    # A second patch of the same matrix must not write over the rows the first one added.
    kept = second.vectors.copy()
    other = first.patched(3, ["d.py"], [as_batch(chunk_rows(rng, "d.py", 2, 300))], 10**6)
    assert other is not None and other.room is not first.room
    np.testing.assert_array_equal(second.vectors, kept)
    assert other.vector_of(300) is not None and second.vector_of(300) is None


def test_a_load_and_a_compact_copy_leave_room_for_the_patches_after_them():
    """The first patch after a load, or after a compact copy, appends into room the load or
    the copy left, instead of copying every vector into a new array beside the held ones (at
    23.7k chunks a re-index's first patch peaked 15-20 MB higher for it: bench/README.md,
    "The in-memory copy's room and its compaction")."""
    rng = np.random.default_rng(12)
    rows = chunk_rows(rng, "a.py", 40, 0) + chunk_rows(rng, "b.py", 4, 100)
    matrix = VectorMatrix.from_batches(1, [as_batch(rows)], 44, DIM, KEPT, 10**6)
    assert matrix.room is not None
    added = chunk_rows(rng, "c.py", 2, 200)
    first = matrix.patched(2, ["c.py"], [as_batch(added)], 10**6)
    assert first is not None and first.room is matrix.room
    assert np.shares_memory(first.vectors, matrix.vectors)
    # Most of a.py rewritten: past DEAD_SHARE_MAX, one compact copy, with room of its own,
    # its columns in one piece.
    rewritten = chunk_rows(rng, "a.py", 40, 300)
    compact = first.patched(3, ["a.py"], [as_batch(rewritten)], 10**6)
    assert compact is not None and compact.alive is None and compact.room is not first.room
    assert all(column.num_chunks == 1 for column in compact.columns.columns)
    more = chunk_rows(rng, "d.py", 2, 400)
    after = compact.patched(4, ["d.py"], [as_batch(more)], 10**6)
    assert after is not None and after.room is compact.room
    assert np.shares_memory(after.vectors, compact.vectors)
    assert_answers_as_loaded(after, rows[40:] + added + rewritten + more, rng)


@pytest.mark.parametrize("seed", range(4))
def test_a_move_in_place_puts_every_kept_row_where_a_copy_would(seed):
    """Rows move towards the start, some far (all but the last dead), some not at all (the
    first ones), in blocks smaller than the gaps and larger: none is overwritten before it
    is read."""
    rng = np.random.default_rng(seed)
    rows = 3 * vector_cache.MOVE_BLOCK_ROWS // 2
    vectors = rng.standard_normal((rows + 50, 4)).astype(np.float32)
    keep = rng.random(rows) < [0.05, 0.5, 0.97, 1.0][seed]
    keep[:seed * 100] = True
    added = rng.standard_normal((30, 4)).astype(np.float32)
    want = np.concatenate([vectors[:rows][keep], added])
    vector_cache._mover(vectors, np.flatnonzero(keep), added)()  # noqa: SLF001
    np.testing.assert_array_equal(vectors[:len(want)], want)


def test_a_compaction_in_place_moves_the_vectors_within_their_room(monkeypatch):
    """A patch in place that compacts (here: the room after the rows is full) leaves the
    live vectors' move to the holder of the matrix (see VectorCache.patch) instead of
    copying them beside it: no second array of every vector (34 MB at 23.7k chunks, a
    re-index's peak)."""
    monkeypatch.setattr(vector_cache, "ROOM_MIN_ROWS", 0)  # a room of these rows' size
    rng = np.random.default_rng(13)
    rows = chunk_rows(rng, "a.py", 30, 0) + chunk_rows(rng, "b.py", 10, 100)
    matrix = VectorMatrix.from_batches(1, [as_batch(rows)], 40, DIM, KEPT, 10**6)
    assert len(matrix.room.vectors) == 50
    rewritten = chunk_rows(rng, "b.py", 12, 200)  # 52 rows would not fit
    pending = matrix.patched(2, ["b.py"], [as_batch(rewritten)], 10**6, in_place=True)
    assert pending is not None and pending.pending_move is not None
    assert pending.room is matrix.room and pending.alive is None
    compact = pending.settled()
    assert compact.pending_move is None and np.shares_memory(compact.vectors, matrix.vectors)
    assert_answers_as_loaded(compact, rows[:30] + rewritten, rng)
    # A patch of a matrix whose room a later patch took (a search held it) copies instead.
    first = compact.patched(3, ["c.py"], [as_batch(chunk_rows(rng, "c.py", 2, 300))], 10**6)
    assert first is not None and first.room is compact.room
    again = compact.patched(3, ["b.py"], [as_batch(chunk_rows(rng, "b.py", 9, 400))], 10**6,
                            in_place=True)
    assert again is not None and again.pending_move is None and again.room is not compact.room


def test_a_compaction_copies_when_its_array_would_be_nearly_full_or_mostly_empty(monkeypatch):
    """In place only when the live rows leave an eighth of them spare (else every patch
    after would compact again) and fill half the array (else, after a large deletion, its
    pages would stay resident for a few rows): a new array of their size otherwise."""
    monkeypatch.setattr(vector_cache, "ROOM_MIN_ROWS", 0)
    rng = np.random.default_rng(14)
    rows = chunk_rows(rng, "a.py", 30, 0) + chunk_rows(rng, "b.py", 10, 100)
    matrix = VectorMatrix.from_batches(1, [as_batch(rows)], 40, DIM, KEPT, 10**6)
    added = chunk_rows(rng, "c.py", 9, 200)
    grown = matrix.patched(2, ["c.py"], [as_batch(added)], 10**6,
                           in_place=True)  # 49 rows of 50: appended
    assert grown is not None and grown.alive is not None and grown.room is matrix.room
    edited = chunk_rows(rng, "b.py", 10, 300)
    full = grown.patched(3, ["b.py"], [as_batch(edited)], 10**6, in_place=True)
    assert full is not None and full.pending_move is None and full.room is not matrix.room
    assert len(full.room.vectors) >= 49 + 49 // 4  # a quarter spare again
    assert_answers_as_loaded(full, rows[:30] + added + edited, rng)
    gone = matrix.patched(2, ["a.py"], [as_batch([])], 10**6, in_place=True)
    assert gone is not None and gone.pending_move is None and gone.room is not matrix.room
    assert len(gone.room.vectors) < 25 and not np.shares_memory(gone.vectors, matrix.vectors)
    assert_answers_as_loaded(gone, rows[30:], rng)


def in_place_ready(store: ChunkStore, monkeypatch) -> VectorMatrix:
    """The copy loaded again with a room of its rows' size (12 rows, 3 spare), so that a
    write that adds more than 3 rows compacts in place."""
    monkeypatch.setattr(vector_cache, "ROOM_MIN_ROWS", 0)
    store._vectors._matrix = store._load_vectors()  # noqa: SLF001
    return held(store)


def test_a_search_that_overlapped_a_move_in_place_reads_again(loaded, monkeypatch):
    """VectorCache.consistent: a read during which the held matrix's rows moved is thrown
    away and made again, on the new matrix."""
    store, rng = loaded
    cache = store._vectors  # noqa: SLF001
    before = in_place_ready(store, monkeypatch)
    calls = []

    def read():
        calls.append(store.vectors_in_memory())
        if len(calls) == 1:  # a write compacts in place while this read runs
            store.replace_files([record("lib/b.py", 4)], rows_for("lib/b.py", rng, 4, "beta"))
        return len(calls)

    assert cache.consistent(read) == 2
    after = held(store)
    assert calls == [before, after] and after.version > before.version
    assert after.alive is None and np.shares_memory(after.vectors, before.vectors)
    assert_same_matrix(after, store._load_vectors())  # noqa: SLF001
    assert cache.consistent(lambda: "once") == "once"  # no move: read once


@pytest.mark.parametrize("failure", [MemoryError, KeyboardInterrupt])
def test_a_move_that_fails_drops_the_copy_and_searches_ask_lancedb(loaded, monkeypatch,
                                                                   failure):
    """Rows half moved are in no known order: the copy is let go (a reload catches up), the
    write and the searches go on, and the reads' count is left even (none waits forever).
    An interrupt still ends the write (the CLI's Ctrl-C), the copy let go all the same."""
    store, rng = loaded
    cache = store._vectors  # noqa: SLF001
    in_place_ready(store, monkeypatch)

    def failing_move(*args):
        def move():
            raise failure("simulated: the move cut short")
        return move

    monkeypatch.setattr(vector_cache, "_mover", failing_move)
    written = rows_for("lib/b.py", rng, 4, "beta")
    if failure is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            store.replace_files([record("lib/b.py", 4)], written)
    else:
        store.replace_files([record("lib/b.py", 4)], written)
    assert held(store) is None and cache._moves % 2 == 0  # noqa: SLF001
    hits = store.vector_search(written[0]["vector"], 3)
    assert hits[0]["id"] == written[0]["id"] and len(hits) == 3
    assert store.text_search("pass", 5, with_vectors=False)  # LanceDB's full-text index


def test_a_compaction_of_a_patched_copy_relabels_its_live_rows_in_place():
    rng = np.random.default_rng(8)
    rows = chunk_rows(rng, "a.py", 20, 0) + chunk_rows(rng, "b.py", 3, 100)
    matrix = VectorMatrix.from_batches(1, [as_batch(rows)], 23, DIM, KEPT, 10**6)
    written = chunk_rows(rng, "b.py", 1, 200)
    patched = matrix.patched(2, ["b.py"], [as_batch(written)], 10**6)
    assert patched is not None and patched.alive is not None  # 3 of 24 out: appended
    # The table compacted: the 21 live chunks at new row ids, in another order.
    live = (rows[:20] + written)[::-1]
    moved = patched.relabelled(3, pa.array([r["id"] for r in live]),
                               np.arange(500, 521, dtype=np.uint64))
    # No copy beside the patched one (that copy was a re-index's peak): the 3 replaced rows
    # stay masked under their old row ids.
    assert moved is not None and moved.live_rows == 21 and len(moved.row_ids) == 24
    assert np.shares_memory(moved.vectors, patched.vectors) and moved.columns is patched.columns
    assert sorted(moved.row_ids[~moved.alive].tolist()) == [100, 101, 102]
    assert moved.terms is not None and moved.holds_text
    # Searches answer as a load of these rows (in the order the copy keeps them: ties go
    # to the earlier row) would.
    moved_ids = {r["id"]: row_id for r, row_id in zip(live, range(500, 521), strict=True)}
    fresh = VectorMatrix.from_batches(3, [as_batch([{**r, "_rowid": moved_ids[r["id"]]}
                                                    for r in live[::-1]])], 21, DIM, KEPT, 10**6)
    assert everything_found(moved) == everything_found(fresh)
    for row, row_id in zip(live, range(500, 521), strict=True):
        np.testing.assert_array_equal(moved.vector_of(row_id), row["vector"])
    in_place = [{**r, "_rowid": moved_ids[r["id"]]} for r in rows[:20] + written]
    assert_answers_as_loaded(moved, in_place, rng)
    # Later patches go on from it, appending (b.py again, one chunk keeping its id), and a
    # second compaction relabels a matrix that still has masked rows, one of them under an
    # id a live row now has too.
    rewritten = [{**chunk_rows(rng, "b.py", 1, 600)[0], "id": written[0]["id"]}]
    again = moved.patched(4, ["b.py"], [as_batch(rewritten)], 10**6)
    assert again is not None and again.alive is not None and again.live_rows == 21
    assert np.shares_memory(again.vectors, moved.vectors)  # appended, not copied
    live_again = in_place[:20] + rewritten
    assert_answers_as_loaded(again, live_again, rng)
    second = again.relabelled(5, pa.array([r["id"] for r in live_again]),
                              np.array([100 + n for n in range(21)], dtype=np.uint64))
    assert second is not None and second.live_rows == 21 and len(second.row_ids) == 25
    assert 100 in second.row_ids[~second.alive].tolist()  # a masked row's id, now a live one's
    assert_answers_as_loaded(second, [{**r, "_rowid": 100 + n}
                                      for n, r in enumerate(live_again)], rng)


def test_text_over_its_budget_with_the_masked_rows_is_kept_as_a_load_keeps_it():
    """The appended path would count the masked rows' text too: the patch makes a compact
    copy instead, which keeps the text when the live rows' text fits, as a load does."""
    rng = np.random.default_rng(9)
    rows = chunk_rows(rng, "a.py", 30, 0) + chunk_rows(rng, "b.py", 2, 100)
    budget = sum(len(r["text"]) for r in rows) * 4 + 200  # roomy for the live rows' text
    matrix = VectorMatrix.from_batches(1, [as_batch(rows)], 32, DIM, KEPT, budget)
    assert matrix.holds_text
    written = chunk_rows(rng, "b.py", 2, 200)
    budget_now = matrix.columns.column("text").nbytes + 10  # not with b.py twice over
    patched = matrix.patched(2, ["b.py"], [as_batch(written)], budget_now)
    fresh = VectorMatrix.from_batches(2, [as_batch(rows[:30] + written)], 32, DIM, KEPT,
                                      budget_now)
    assert patched is not None and fresh.holds_text and patched.holds_text
    assert patched.alive is None  # the compact copy


def test_a_matrix_without_postings_is_patched_by_appending_too():
    rng = np.random.default_rng(10)
    rows = chunk_rows(rng, "a.py", 20, 0) + chunk_rows(rng, "b.py", 2, 100)
    plain = ["path", "id", "kind"]
    for row in rows:
        row.pop("terms"), row.pop("defines")

    def batch_of(these: list[dict]) -> pa.RecordBatch:
        full = as_batch([{**r, "terms": "", "defines": ""} for r in these])
        return full.drop_columns(["terms", "defines"])

    matrix = VectorMatrix.from_batches(1, [batch_of(rows)], 22, DIM, plain, 10**6)
    written = [{k: v for k, v in r.items() if k not in ("terms", "defines")}
               for r in chunk_rows(rng, "b.py", 1, 200)]
    patched = matrix.patched(2, ["b.py"], [batch_of(written)], 10**6)
    assert patched is not None and patched.alive is not None and patched.terms is None
    fresh = VectorMatrix.from_batches(2, [batch_of(rows[:20] + written)], 21, DIM, plain,
                                      10**6)
    for query in list(SHARED) + [r["vector"] for r in written]:
        mine, _ = patched.nearest(query, 5)
        theirs, _ = fresh.nearest(query, 5)
        assert patched.rows_at(mine) == fresh.rows_at(theirs)


def test_a_load_holds_no_read_whole_for_the_few_rows_it_keeps_of_it():
    """A scan hands out batches that may be slices of larger reads. The load kept each
    batch's columns as they came until its end, and with them every read whole: at 23.7k
    chunks the load peaked 77 MB above what it then held, 36 MB once each batch's columns
    were copied as they came (bench/README.md, "The in-memory copy's load")."""
    rng = np.random.default_rng(9)
    reads, kept_rows = 6, 10
    live: list[int] = []

    def scan():
        for n in range(reads):
            read = as_batch(chunk_rows(rng, f"src/m{n}.py", 2_000, 10_000 * n))
            yield read.slice(0, kept_rows)
            del read  # the scan lets go of its read; only what the load keeps stays
            live.append(pa.total_allocated_bytes())

    one_read = as_batch(chunk_rows(rng, "src/x.py", 2_000, 0)).nbytes
    before = pa.total_allocated_bytes()
    matrix = VectorMatrix.from_batches(1, scan(), reads * kept_rows, DIM, KEPT, 10**6)
    assert matrix.live_rows == reads * kept_rows and matrix.holds_text
    # what stayed allocated after each read was let go: the batch in hand (the load's loop
    # holds it, and through it its read, until the next one), not every read so far
    assert max(live) - before < 2 * one_read, (before, live, one_read)
