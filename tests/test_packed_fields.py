"""A chunk's ranking fields read back from one packed column: the same rows as from the
columns themselves, for indexes written with the column, given it later, or holding rows it
cannot pack. Real LanceDB on disk; random unit vectors."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lsp.store import packed_fields, vector_index
from rag_lsp.store.lance_queries import nearest_rows, text_rows
from rag_lsp.store.lance_store import RESULT_COLUMNS, ChunkStore, FileRecord
from rag_lsp.store.packed_fields import PACKED_COLUMN, PACKED_FIELDS, pack, unpack

DIM = 384
ROWS = 400
WORDS = ("parse", "route", "cache", "token", "render", "socket")


def row(i: int, home: str, vector: np.ndarray, **fields) -> dict:
    """Chunk ``i`` of the file ``home`` (or of ``fields["path"]``)."""
    word = WORDS[i % len(WORDS)]
    path = fields.get("path", home)
    return {"id": f"{path}#{i}", "path": path, "start_line": i + 1, "end_line": i + 3,
            "language": "python", "kind": "function", "symbol": f"{word}_{i}",
            "text": f"def {word}_{i}(): return {word}", "search_text": f"{word} {word}_{i}",
            "defines": f"{word}_{i}", "terms": f"{word} réponse", "content_hash": f"{i:064x}",
            "vector": vector, **fields}


# A field holding the packing's separator, an empty symbol, a path past ASCII, a null field
# beside a separator (as many parts as a good value: the sum of lengths tells), characters
# past the Basic Multilingual Plane (SQL's length must count them as Python does)
ODD = {3: {"symbol": "a\x1fb"}, 4: {"symbol": ""}, 5: {"path": "pkg/dé/ünï.py"},
       6: {"terms": "x\x1fy\x1fz", "symbol": "\x1e"}, 7: {"symbol": None, "terms": "p\x1fq"},
       8: {"symbol": "😀 é", "terms": "𝔘 x"}}
UNPACKABLE = {3, 6, 7}


def vectors(rows: int = ROWS) -> np.ndarray:
    found = np.random.default_rng(5).standard_normal((rows, DIM)).astype(np.float32)
    return found / np.linalg.norm(found, axis=1, keepdims=True)


def write(store: ChunkStore, vecs: np.ndarray, first: int = 0, count: int = ROWS) -> None:
    for start in range(first, first + count, 100):
        path = f"pkg/m{start // 100}.py"
        rows = [row(i, path, vecs[i], **ODD.get(i, {}))
                for i in range(start, start + 100)]
        store.replace_files([FileRecord(path, 1, 1, "0" * 64, 100)],
                            [r for r in rows if r["path"] == path])
        odd = [r for r in rows if r["path"] != path]
        if odd:
            store.replace_files([FileRecord(odd[0]["path"], 1, 1, "0" * 64, 100)], odd)


@pytest.fixture
def large(monkeypatch):
    """Past the (lowered) matrix size: LanceDB answers every search."""
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", ROWS // 2)


def columns_of(store: ChunkStore) -> dict[str, dict]:
    """Every row's fields as the separate columns hold them, by id."""
    found = (store._chunks.search().select(list(PACKED_FIELDS))  # noqa: SLF001
             .limit(None).to_list())
    return {r["id"]: r for r in found}


def assert_fields_as_stored(rows: list[dict], stored: dict[str, dict]) -> None:
    assert rows
    for r in rows:
        assert PACKED_COLUMN not in r and "_rowid" not in r
        assert {name: r[name] for name in PACKED_FIELDS} == {
            name: stored[r["id"]][name] for name in PACKED_FIELDS}


def test_pack_and_unpack_give_the_fields_back():
    original = row(7, "pkg/ö.py", np.zeros(DIM))
    packed = {"id": "x", PACKED_COLUMN: pack(original)}
    assert unpack([packed]) == []
    assert {name: packed[name] for name in PACKED_FIELDS} == {
        name: original[name] for name in PACKED_FIELDS}
    assert isinstance(packed["start_line"], int)


@pytest.mark.parametrize("fields", [{"symbol": "a\x1fb"}, {"terms": "\x1f"}, {"symbol": None},
                                    {"path": "p\x1fq", "symbol": None}])
def test_a_row_that_cannot_be_packed_is_left_to_the_columns(fields):
    original = row(7, "pkg/a.py", np.zeros(DIM), **fields)
    packed = {"id": "x", PACKED_COLUMN: pack(original)}
    assert unpack([packed]) == [packed]
    assert "path" not in packed and PACKED_COLUMN not in packed


def test_a_damaged_or_missing_value_is_left_to_the_columns():
    good = pack(row(1, "pkg/a.py", np.zeros(DIM)))
    assert good is not None
    rows = [{"id": "a", PACKED_COLUMN: good.replace("pkg", "pkx")},
            {"id": "b", PACKED_COLUMN: good.rsplit("\x1f", 1)[0] + "\x1fnot a number"},
            {"id": "c", PACKED_COLUMN: None}, {"id": "d"},
            {"id": "e", PACKED_COLUMN: good.replace("pkg", "pkgg")}]
    assert [r["id"] for r in unpack(rows)] == ["b", "c", "d", "e"]
    # A check of lengths, not a checksum: it tells where the fields end, not their letters
    assert rows[0]["path"] == "pkx/a.py"


def test_the_column_added_to_an_older_index_packs_as_writes_do(tmp_path):
    vecs = vectors()
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    write(store, vecs)
    written = {r["id"]: r[PACKED_COLUMN] for r in store._chunks.search()  # noqa: SLF001
               .select(["id", PACKED_COLUMN]).limit(None).to_list()}
    assert written[f"{ODD[5]['path']}#5"] == pack(row(5, ODD[5]["path"], vecs[5], **ODD[5]))
    store._chunks.drop_columns([PACKED_COLUMN])  # noqa: SLF001  (as an older rag-lsp wrote it)
    assert store.ensure_packed_column()
    assert not store.ensure_packed_column()
    added = {r["id"]: r[PACKED_COLUMN] for r in store._chunks.search()  # noqa: SLF001
             .select(["id", PACKED_COLUMN]).limit(None).to_list()}
    assert len(added) == ROWS
    for chunk_id, value in written.items():
        if value is None:  # a null field: pack() writes none, the SQL fewer fields
            assert chunk_id.endswith("#7") and unpack([{PACKED_COLUMN: added[chunk_id]}])
        else:
            assert added[chunk_id] == value, chunk_id


def spy_on_unpack(monkeypatch) -> tuple[list[int], list[dict]]:
    """The rows searches read from the packed column from here on (a count), and those it
    could not give the fields of (the rows themselves: their fields come after)."""
    from rag_lsp.store import lance_store

    count, unread = [0], []

    def counted(rows: list[dict]) -> list[dict]:
        count[0] += len(rows)
        left = unpack(rows)
        unread.extend(left)
        return left

    monkeypatch.setattr(lance_store, "unpack", counted)
    return count, unread


def test_searches_read_the_same_fields_with_and_without_the_column(tmp_path, large,
                                                                   monkeypatch):
    vecs = vectors()
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    write(store, vecs)
    store.ensure_fts_index()
    store.optimize()
    assert store.large()
    stored = columns_of(store)
    query = vecs[3] + 0.4 * vecs[6] + 0.3 * vecs[7]
    query /= np.linalg.norm(query)

    def searched() -> list[list[dict]]:
        return [store.vector_search(query, 20),
                store.text_search("parse route", 30, with_vectors=True),
                store.text_search("parse_6 route_1 render_4", 10, column="defines")]

    packed_reads, unread = spy_on_unpack(monkeypatch)
    packed = searched()
    assert packed_reads[0] >= sum(map(len, packed))  # every row came through the packed path
    for rows in packed:
        assert_fields_as_stored(rows, stored)
    # the odd rows among them, read from their columns by row id
    assert {f"pkg/m0.py#{i}" for i in UNPACKABLE} <= {r["id"] for r in packed[0]}
    assert {f"pkg/m0.py#{i}" for i in UNPACKABLE} <= {r["id"] for r in unread}
    assert "render_4" in {r["defines"] for r in packed[2]}
    table = store._reading()  # noqa: SLF001
    plain = nearest_rows(table, query, columns=[*RESULT_COLUMNS, "_distance"], limit=20,
                         where=None, tune=vector_index.approximate)
    assert [r["id"] for r in plain] == [r["id"] for r in packed[0]]
    plain_text = text_rows(table, "parse route", column="search_text",
                           columns=[*RESULT_COLUMNS, "_score"], limit=30, where=None)
    assert [(r["id"], r["_score"]) for r in plain_text] == [
        (r["id"], r["_score"]) for r in packed[1]]

    store._chunks.drop_columns([PACKED_COLUMN])  # noqa: SLF001  (an index from before it)
    reads_before = packed_reads[0]
    without = searched()
    assert packed_reads[0] == reads_before  # the columns themselves this time
    for before, after in zip(packed, without, strict=True):
        assert [(r["id"], {n: r[n] for n in PACKED_FIELDS}) for r in before] == [
            (r["id"], {n: r[n] for n in PACKED_FIELDS}) for r in after]
        assert [set(r) for r in before] == [set(r) for r in after]  # no key more or less


def test_rows_written_without_their_packed_value_read_from_their_columns(tmp_path, large,
                                                                         monkeypatch):
    """An older rag-lsp writing into an index that has the column leaves it null."""
    vecs = vectors()
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    monkeypatch.setattr(packed_fields, "pack", lambda _row: None)
    monkeypatch.setattr("rag_lsp.store.lance_store.pack", lambda _row: None)
    write(store, vecs)
    store.ensure_fts_index()
    store.optimize()
    assert all(r[PACKED_COLUMN] is None for r in store._chunks.search()  # noqa: SLF001
               .select([PACKED_COLUMN]).limit(None).to_list())
    stored = columns_of(store)
    packed_reads, unread = spy_on_unpack(monkeypatch)
    found = [store.vector_search(vecs[40], 15), store.text_search("cache", 25)]
    for rows in found:
        assert_fields_as_stored(rows, stored)
    # the packed path, every row of it given its fields from the columns
    assert packed_reads[0] == len(unread) >= sum(map(len, found))


def test_an_index_run_gives_an_older_index_the_column_and_the_same_answers(tmp_path, embedder,
                                                                             monkeypatch):
    """Real model and LanceDB: the sample workspace past the (lowered) matrix size, its
    index made as an older rag-lsp left it; searches answer the same before and after the
    next run adds the column, and read it then."""
    from rag_lsp.config import Settings
    from rag_lsp.workspace import Workspace
    from tests.conftest import indexed_sample

    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", 8)  # the sample: ~40 chunks
    root = indexed_sample(tmp_path, embedder).root
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    chunks = ws._index.store()._chunks  # noqa: SLF001
    chunks.drop_columns([PACKED_COLUMN])
    queries = ("follow redirects", "how are passwords hashed", "LRUCache")

    def answers(workspace: Workspace) -> list[list[tuple]]:
        return [[(r.path, r.start_line, r.end_line, r.score) for r in
                 workspace.search(q, top_k=5).results] for q in queries]

    before = answers(Workspace.open(root, Settings.from_dict({}), embedder=embedder))
    assert all(before)
    ws.index()
    assert PACKED_COLUMN in ws._index.store()._chunks.schema.names  # noqa: SLF001
    unpacked = []
    real_unpack = packed_fields.unpack
    monkeypatch.setattr("rag_lsp.store.lance_store.unpack",
                        lambda rows: unpacked.append(len(rows)) or real_unpack(rows))
    after = answers(Workspace.open(root, Settings.from_dict({}), embedder=embedder))
    assert unpacked  # the searches read the packed fields
    assert after == before


def test_the_column_added_under_a_held_copy_keeps_it(tmp_path, embedder, monkeypatch):
    """Below the matrix size: the copy a process holds in memory takes the new version
    (no row moved) instead of going stale, and answers as before."""
    import time

    from tests.conftest import indexed_sample

    ws = indexed_sample(tmp_path, embedder)
    store = ws._index.store()  # noqa: SLF001
    store._chunks.drop_columns([PACKED_COLUMN])  # noqa: SLF001
    queries = ("follow redirects", "LRUCache", "how are passwords hashed")

    def held():  # noqa: ANN202
        deadline = time.monotonic() + 60
        while ((matrix := store.vectors_in_memory()) is None
               or matrix.version != store._chunks.version):  # noqa: SLF001
            assert time.monotonic() < deadline, "the in-memory copy never loaded"
            ws.search("warm up")
            time.sleep(0.02)
        return matrix

    held()
    before = [[(r.path, r.start_line, r.score) for r in ws.search(q).results] for q in queries]
    assert store.ensure_packed_column()
    matrix = store.vectors_in_memory()
    assert matrix is not None and matrix.version == store._chunks.version  # noqa: SLF001
    after = [[(r.path, r.start_line, r.score) for r in ws.search(q).results] for q in queries]
    assert after == before and all(before)
    # A filtered lookup asks LanceDB (the packed column), the vectors from the copy by row id
    packed_reads, _unread = spy_on_unpack(monkeypatch)
    rows = store.text_search("cache", 10, "path != 'nothing'", with_vectors=True)
    assert packed_reads[0] == len(rows) > 0
    assert all(len(r["vector"]) == embedder.dimension for r in rows)
    assert_fields_as_stored(rows, columns_of(store))


def test_a_column_that_cannot_be_added_leaves_the_index_searched_from_its_columns(
        tmp_path, large, monkeypatch, caplog):
    """The column only makes searches faster: a failure to add it (a full disk) is logged,
    the run goes on, and a later run adds it."""
    vecs = vectors()
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    write(store, vecs)
    store.ensure_fts_index()
    store.optimize()
    chunks = store._chunks  # noqa: SLF001
    chunks.drop_columns([PACKED_COLUMN])

    def full_disk(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(type(chunks), "add_columns", full_disk)
        assert not store.ensure_packed_column()
    assert "could not add the packed fields' column" in caplog.text
    assert "No space left on device" in caplog.text
    assert store.large()
    stored = columns_of(store)
    assert_fields_as_stored(store.vector_search(vecs[12], 10), stored)
    assert store.ensure_packed_column()
    assert_fields_as_stored(store.vector_search(vecs[12], 10), columns_of(store))
