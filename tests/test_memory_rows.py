"""Searches ranked from the columns held in memory with the vectors, and their text: held
too, within a budget (``TEXT_IN_MEMORY_BYTES``), else read for the chunks returned.

Real model, real LanceDB: the sample workspace once its in-memory copy has loaded.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from rag_lsp.config import Settings
from rag_lsp.store import lance_store
from rag_lsp.store.lance_store import KEPT_COLUMNS, ChunkStore
from rag_lsp.store.vector_cache import SETTLE_SHARE_MIN, VectorMatrix
from rag_lsp.workspace import Workspace
from tests.conftest import indexed_sample

QUERIES = ("follow redirects", "how are passwords hashed and checked", "LRUCache",
           "least recently used eviction", "setup and install")


@pytest.fixture(params=["text in memory", "text over budget"])
def text_held(request, monkeypatch) -> bool:
    """Each test runs with the text held in memory and with a budget too small for it."""
    if request.param == "text over budget":
        monkeypatch.setattr(lance_store, "TEXT_IN_MEMORY_BYTES", 100)
    return request.param == "text in memory"


def loaded_store(workspace: Workspace, text_held: bool) -> ChunkStore:
    workspace.search("warm up")  # opens the store and starts loading its memory copy
    store = workspace._index.store()  # noqa: SLF001 (what a search reads)
    deadline = time.monotonic() + 60
    while (matrix := store.vectors_in_memory()) is None or matrix.columns is None:
        assert time.monotonic() < deadline, "the ranking columns never loaded into memory"
        time.sleep(0.02)
    assert matrix.columns.column_names == KEPT_COLUMNS + (["text"] if text_held else [])
    return store


class RowsRead:
    """Counts the rows a store reads back from LanceDB by row id."""

    def __init__(self, store: ChunkStore, monkeypatch: pytest.MonkeyPatch):
        self.rows = 0
        take = store._view.take_row_ids  # noqa: SLF001 - the handle reads go through

        def counting(row_ids):
            self.rows += len(row_ids)
            return take(row_ids)

        monkeypatch.setattr(store._view, "take_row_ids", counting)  # noqa: SLF001


def test_results_are_the_same_as_from_rows_read_back(workspace, monkeypatch, text_held):
    store = loaded_store(workspace, text_held)
    read = RowsRead(store, monkeypatch)
    from_memory = [workspace.search(q).results for q in QUERIES]
    chunks = [workspace.find_chunks(q, limit=8) for q in QUERIES]
    rows_from_memory = read.rows
    assert any(from_memory) and all(r.snippet for found in from_memory for r in found)
    assert all(h.text for found in chunks for h in found)

    monkeypatch.setattr(VectorMatrix, "rows_at", lambda self, positions, terms=(): None)
    read.rows = 0
    assert [workspace.search(q).results for q in QUERIES] == from_memory
    assert [workspace.find_chunks(q, limit=8) for q in QUERIES] == chunks
    if text_held:  # nothing is read back
        assert rows_from_memory == 0 < read.rows
    else:  # only the returned chunks' text is read, not every retriever's ~70 rows
        assert rows_from_memory < read.rows / 2


def test_text_is_found_by_chunk_id_once_row_ids_have_moved(workspace, monkeypatch):
    monkeypatch.setattr(lance_store, "TEXT_IN_MEMORY_BYTES", 0)  # rows come without text
    store = loaded_store(workspace, text_held=False)
    query = workspace.embedder.embed_query("follow redirects")
    rows = store.vector_search(query, 6, terms=())
    assert rows and all("text" not in row for row in rows)
    expected = {row["id"]: row["text"]
                for row in store.chunk_rows("true", ["id", "text"])}
    # A compaction gives rows new row ids: here the ids of other rows, and one that is gone.
    rows[0]["_rowid"], rows[1]["_rowid"] = rows[1]["_rowid"], rows[0]["_rowid"]
    rows[2]["_rowid"] = 10**12
    gone = {**rows[3], "id": "deleted-meanwhile"}
    store.fill_text([*rows, gone])
    assert all(row["text"] == expected[row["id"]] for row in rows)
    assert gone["text"] == ""


def test_memory_rows_carry_the_stored_text(workspace, monkeypatch):
    store = loaded_store(workspace, text_held=True)
    query = workspace.embedder.embed_query("follow redirects")
    read = RowsRead(store, monkeypatch)
    rows = store.vector_search(query, 6, terms=())
    expected = {row["id"]: row["text"] for row in store.chunk_rows("true", ["id", "text"])}
    assert rows and all(row["text"] == expected[row["id"]] for row in rows)
    assert read.rows == 0 and all("_rowid" in row for row in rows)  # from memory


def test_rows_asked_without_a_search_s_words_carry_all_their_stored_terms(
        workspace, monkeypatch):
    """The copy keeps no ``terms`` column: a row from memory has only those of a search's
    words it holds. A caller that names none gets whole rows (read back), never rows that
    silently lack their terms (a worse ranking and no error)."""
    store = loaded_store(workspace, text_held=True)
    stored = {row["id"]: row["terms"] for row in store.chunk_rows("true", ["id", "terms"])}
    query = workspace.embedder.embed_query("follow redirects")
    read = RowsRead(store, monkeypatch)
    whole = [store.vector_search(query, 6), store.text_search("redirect response", 6)]
    assert all(whole) and read.rows == sum(len(rows) for rows in whole)  # read back
    for rows in whole:
        assert [row["terms"] for row in rows] == [stored[row["id"]] for row in rows]
    read.rows = 0
    asked = ["redirect", "zzzunheard"]
    for rows in (store.vector_search(query, 6, terms=asked),
                 store.text_search("redirect response", 6, terms=asked)):
        assert [row["id"] for row in rows] == [row["id"] for row in whole.pop(0)]
        for row in rows:  # (the postings hold its path's words too)
            stored_held = {t for t in asked if t in stored[row["id"]].split()}
            assert stored_held <= set(row["terms"].split()) <= set(asked)
        assert any("redirect" in row["terms"] for row in rows)
    assert read.rows == 0


def test_a_reexport_file_is_ranked_on_its_text(tmp_path, embedder, monkeypatch, text_held):
    """The re-export prior reads a chunk's text: rows from memory get theirs before ranking
    (without it, ``pkg/__init__.py`` came first for "pkg retry jitter")."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(
        "from pkg.retry import RetryPolicy, backoff_delay\n"
        "from pkg.jitter import full_jitter\n", "utf-8")
    (root / "pkg" / "retry.py").write_text(
        "class RetryPolicy:\n    '''How often and how long to retry a failed request.'''\n\n"
        "    def __init__(self, attempts: int = 3):\n        self.attempts = attempts\n\n\n"
        "def backoff_delay(attempt: int) -> float:\n"
        "    '''Exponential backoff delay before retrying.'''\n    return 2.0 ** attempt\n",
        "utf-8")
    (root / "pkg" / "jitter.py").write_text(
        "def full_jitter(delay: float) -> float:\n    '''Random jitter up to delay.'''\n"
        "    import random\n    return random.uniform(0, delay)\n", "utf-8")
    # A name defined outside the workspace enters it here (any file may re-export in TS).
    (root / "web").mkdir()
    (root / "web" / "limits.ts").write_text(
        'export { TokenBucket } from "bucket-lib";\n'
        "export const DEFAULT_RATE = 10;\n", "utf-8")
    from rag_lsp.config import Settings

    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    loaded_store(ws, text_held)
    queries = ("pkg retry jitter", "TokenBucket", "retry policy backoff delay", "RetryPolicy")
    from_memory = [ws.search(q).results for q in queries]
    assert [r.path for r in from_memory[0]] == ["pkg/retry.py", "pkg/jitter.py",
                                                "pkg/__init__.py"]
    assert from_memory[1][0].path == "web/limits.ts"
    monkeypatch.setattr(VectorMatrix, "rows_at", lambda self, positions, terms=(): None)
    assert [ws.search(q).results for q in queries] == from_memory


def test_an_edit_then_a_compaction_leave_the_copy_answering_as_a_fresh_load(
        tmp_path, embedder, monkeypatch):
    """An edit appends the file's new rows to the in-memory copy and masks its old ones; a
    compaction then moves rows to new row ids. The copy takes the new row ids in place, the masked
    rows kept (no second copy beside it, which was a re-index's peak), and answers as a
    fresh process's load of the compacted table does."""
    workspace = indexed_sample(tmp_path, embedder)
    store = loaded_store(workspace, text_held=True)
    client = workspace.root / "src/http/client.py"
    client.write_text(client.read_text(encoding="utf-8") + '''

def retry_later(request, delay=2.0):
    """Send the request again once the delay has passed."""
    return request
''', encoding="utf-8")
    workspace.update(["src/http/client.py"])
    patched = store.vectors_in_memory()
    assert patched is not None and patched.alive is not None and not patched.alive.all()
    monkeypatch.setattr(ChunkStore, "needs_optimize", lambda self: True)
    settle_copy = ChunkStore.settle_copy  # the run's end makes the copy compact: not yet
    monkeypatch.setattr(ChunkStore, "settle_copy", lambda self: False)
    workspace.index()  # nothing to write: it compacts
    moved = store.vectors_in_memory()
    assert moved is not None and moved.version > patched.version
    assert moved.alive is not None and np.shares_memory(moved.vectors, patched.vectors)
    assert (moved.row_ids[moved.alive] != patched.row_ids[patched.alive]).any()  # moved

    queries = (*QUERIES, "send the request again after a delay")

    def answers(ws: Workspace) -> list:
        return [[(r.path, r.start_line, round(r.score, 5)) for r in ws.search(q).results]
                for q in queries]

    fresh = Workspace.open(workspace.root, Settings.from_dict({}), embedder=embedder)
    loaded = loaded_store(fresh, text_held=True).vectors_in_memory()
    assert loaded is not None and loaded.alive is None  # a load holds no masked rows
    assert answers(workspace) == answers(fresh)
    assert answers(workspace)[-1][0][0] == "src/http/client.py"
    # Then made compact, as a run's end does: the same answers, nothing masked or appended.
    assert settle_copy(store)
    settled = store.vectors_in_memory()
    assert settled is not None and settled.version == moved.version
    assert settled.unsettled_share == 0
    assert settled.alive is None and settled.appended_rows == 0
    assert answers(workspace) == answers(fresh)


@pytest.mark.parametrize("settled_by", ["a burst's compaction", "a run's end"])
def test_the_copy_saves_patched_is_made_compact_once_they_settle(tmp_path, embedder,
                                                                 monkeypatch, settled_by):
    """A save patches the in-memory copy (its rows appended, the old ones masked out);
    once the saves settle, the server's compaction of the burst makes the copy compact,
    compaction due or not, and so does the end of an index run."""
    workspace = indexed_sample(tmp_path, embedder)
    store = loaded_store(workspace, text_held=True)
    client = workspace.root / "src/http/client.py"
    client.write_text(client.read_text(encoding="utf-8") + "\n\ndef resend(r):\n    return r\n",
                      encoding="utf-8")
    workspace.update(["src/http/client.py"])
    patched = store.vectors_in_memory()
    assert patched is not None and patched.unsettled_share >= SETTLE_SHARE_MIN
    before = [[(r.path, r.start_line, round(r.score, 5)) for r in workspace.search(q).results]
              for q in QUERIES]
    if settled_by == "a run's end":
        workspace.index()
    else:
        monkeypatch.setattr(ChunkStore, "needs_optimize", lambda self: False)
        assert not workspace.compact()  # none due
    settled = store.vectors_in_memory()
    assert settled is not None and settled is not patched and settled.unsettled_share == 0
    assert [[(r.path, r.start_line, round(r.score, 5)) for r in workspace.search(q).results]
            for q in QUERIES] == before
