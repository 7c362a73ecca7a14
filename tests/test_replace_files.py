"""Replacing a file's chunks (``ChunkStore.replace_files``): an upsert by id, then a delete of
the rows no longer there, with readers kept on the version before until both are in (see
``rag_lsp.store.replacing``). What readers see between the two commits, and what a crash
between them leaves for the next run. Real LanceDB on disk; the workspace test uses the real
model."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest
from lancedb.table import LanceTable

from rag_lsp.config import Settings
from rag_lsp.store import lance_store
from rag_lsp.store.lance_store import CHUNKS, ChunkStore, FileRecord
from rag_lsp.store.replacing import (
    MARKER_NAME,
    Replacing,
    read_marker,
    visible_version,
    write_marker,
)
from rag_lsp.workspace import Workspace

DIM = 8


def rows_for(path: str, tags: list[str], rng: np.random.Generator) -> list[dict]:
    """One chunk per tag; the tag names the chunk's content, so its id stays while it does."""
    rows = []
    for line, tag in enumerate(tags, start=1):
        vector = rng.standard_normal(DIM).astype(np.float32)
        rows.append({"id": f"{path}#{tag}", "path": path, "start_line": line,
                     "end_line": line, "language": "python", "kind": "function",
                     "symbol": tag, "text": f"def {tag}(): pass", "search_text": tag,
                     "defines": tag, "terms": tag, "content_hash": f"{tag:0>64}"[-64:],
                     "vector": vector / np.linalg.norm(vector)})
    return rows


def ids_by_path(store: ChunkStore) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for row in store.chunk_rows("true", ["id", "path"]):
        found.setdefault(row["path"], []).append(row["id"])
    return {path: sorted(ids) for path, ids in found.items()}


def latest_ids(store: ChunkStore) -> dict[str, list[str]]:
    """What the table's latest version holds, whatever readers are kept on."""
    table = store._chunks  # noqa: SLF001 - the writer's handle follows the latest version
    found: dict[str, list[str]] = {}
    for row in table.search().select(["id", "path"]).limit(None).to_list():
        found.setdefault(row["path"], []).append(row["id"])
    return {path: sorted(ids) for path, ids in found.items()}


OLD = {"a.py": ["a.py#alpha", "a.py#beta", "a.py#gamma"], "b.py": ["b.py#delta", "b.py#eps"]}


def fail_between_the_commits(store: ChunkStore, rng: np.random.Generator) -> None:
    """A replace of a.py whose upsert lands and whose delete fails (a full disk)."""
    chunks = store._chunks  # noqa: SLF001 - the table whose commits fail
    delete = chunks.delete

    def disk_full(where):
        raise OSError("no space left on device")

    chunks.delete = disk_full
    try:
        with pytest.raises(Exception, match="no space"):
            store.replace_files([FileRecord("a.py", 1, 2, "3" * 64, 2)],
                                rows_for("a.py", ["beta", "zeta"], rng))
    finally:
        chunks.delete = delete


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(5)
    store = ChunkStore(tmp_path / "ix", DIM, create=True)
    store.replace_files([FileRecord("a.py", 1, 1, "1" * 64, 3), FileRecord("b.py", 1, 1,
                                                                          "2" * 64, 2)],
                        rows_for("a.py", ["alpha", "beta", "gamma"], rng)
                        + rows_for("b.py", ["delta", "eps"], rng))
    return store, rng


def test_the_new_rows_replace_the_old_and_other_files_stay(store):
    store, rng = store
    store.replace_files([FileRecord("a.py", 1, 2, "3" * 64, 3)],
                        rows_for("a.py", ["alpha", "zeta", "theta"], rng))
    assert ids_by_path(store) == {"a.py": ["a.py#alpha", "a.py#theta", "a.py#zeta"],
                                  "b.py": ["b.py#delta", "b.py#eps"]}
    # a file left with no chunks, and a rename's old name dropped with the write
    store.replace_files([FileRecord("a.py", 1, 3, "4" * 64, 0),
                         FileRecord("c.py", 1, 1, "5" * 64, 2)],
                        rows_for("c.py", ["delta", "eps"], rng), removed=["b.py"])
    assert ids_by_path(store) == {"c.py": ["c.py#delta", "c.py#eps"]}
    assert set(store.file_records()) == {"a.py", "c.py"}
    assert ids_by_path(store) == latest_ids(store)  # readers follow the latest again


def _recorded(call, name: str, steps: list[str]):
    """``call``, noting ``name`` in ``steps`` first."""
    def recorded(*args, **kwargs):
        steps.append(name)
        return call(*args, **kwargs)
    return recorded


def test_a_bulk_write_hands_freed_memory_back_before_each_of_its_steps(store, monkeypatch):
    """An index run's batch (BULK_WRITE_ROWS chunks or more) hands back what each step freed
    before the next one allocates, while the in-memory copy is held (bench/README.md, "Freed
    memory handed back between a batch's steps"); a save's write of a few chunks leaves it to
    the idle trim, and so does a store past the copy's size."""
    store, rng = store
    steps: list[str] = []
    monkeypatch.setattr(lance_store, "return_freed_memory", lambda: steps.append("hand back"))
    tags = [f"t{n}" for n in range(lance_store.BULK_WRITE_ROWS)]
    store.replace_files([FileRecord("d.py", 1, 2, "6" * 64, len(tags))],
                        rows_for("d.py", tags, rng))
    assert steps == []  # no copy held (as past MATRIX_MAX_ROWS)
    store._vectors._matrix = store._load_vectors()  # noqa: SLF001 - as a server's searches load it
    chunks, vectors = store._chunks, store._vectors  # noqa: SLF001 - the steps, recorded
    for owner, name in ((chunks, "add"), (chunks, "merge_insert"), (chunks, "delete"),
                        (vectors, "patch")):
        monkeypatch.setattr(owner, name, _recorded(getattr(owner, name), name, steps))

    bulk = rows_for("a.py", tags, rng)
    store.stored_for_hashes([row["content_hash"] for row in bulk])
    assert steps == ["hand back"]
    steps.clear()
    store.replace_files([FileRecord("a.py", 1, 2, "3" * 64, len(tags))], bulk)
    assert steps == ["hand back", "merge_insert", "hand back", "delete", "hand back", "patch"]
    assert ids_by_path(store)["a.py"] == sorted(f"a.py#{tag}" for tag in tags)
    steps.clear()  # new files: one append
    store.replace_files([FileRecord("c.py", 1, 2, "5" * 64, len(tags))],
                        rows_for("c.py", tags, rng))
    assert steps == ["hand back", "add", "hand back", "patch"]

    steps.clear()
    saved = rows_for("b.py", ["delta", "zeta"], rng)
    store.stored_for_hashes([row["content_hash"] for row in saved])
    store.replace_files([FileRecord("b.py", 1, 2, "4" * 64, 2)], saved)
    assert steps == ["merge_insert", "delete", "patch"]

    steps.clear()  # a compaction, after whatever writes
    store.optimize()
    assert steps[:1] == ["hand back"]


def test_readers_between_the_two_commits_see_the_version_before(store, tmp_path):
    """Another process, and this one's own searches, see every file as it was until both
    commits are in: neither the new chunks beside the stale ones nor a rename's two names."""
    store, rng = store
    store.ensure_fts_index()
    other = ChunkStore(tmp_path / "ix", DIM)  # a reader of its own, as another process
    seen: list[tuple] = []
    chunks = store._chunks  # noqa: SLF001 - the table whose commits are watched
    delete = chunks.delete

    def watched_delete(where):
        seen.append((latest_ids(store), ids_by_path(other), ids_by_path(store),
                     sorted(r["id"] for r in other.text_search("zeta", 10))))
        return delete(where)

    chunks.delete = watched_delete
    store.replace_files([FileRecord("a.py", 1, 2, "3" * 64, 2),
                         FileRecord("c.py", 1, 1, "5" * 64, 2)],
                        rows_for("a.py", ["beta", "zeta"], rng)
                        + rows_for("c.py", ["delta", "eps"], rng), removed=["b.py"])
    [(latest, other_saw, own_saw, lexical)] = seen
    # the upsert had landed: the latest version held a.py's new chunks beside its stale ones
    assert latest["a.py"] == ["a.py#alpha", "a.py#beta", "a.py#gamma", "a.py#zeta"]
    assert "b.py" in latest and "c.py" in latest
    assert other_saw == OLD and own_saw == OLD
    assert lexical == []
    after = {"a.py": ["a.py#beta", "a.py#zeta"], "c.py": ["c.py#delta", "c.py#eps"]}
    assert ids_by_path(other) == after and ids_by_path(store) == after
    assert [r["id"] for r in other.text_search("zeta", 10)] == ["a.py#zeta"]


def test_the_next_write_restores_the_version_a_failed_replace_kept_readers_on(store, tmp_path):
    """A replace that fails between its commits leaves readers on the version before; the
    next write (here another file's) restores it rather than making the half-replaced file
    visible, and its record still says the old content."""
    store, rng = store
    fail_between_the_commits(store, rng)
    other = ChunkStore(tmp_path / "ix", DIM)
    assert latest_ids(store)["a.py"] == ["a.py#alpha", "a.py#beta", "a.py#gamma", "a.py#zeta"]
    assert ids_by_path(other) == OLD
    store.replace_files([FileRecord("b.py", 1, 2, "6" * 64, 1)], rows_for("b.py", ["eta"], rng))
    assert ids_by_path(other) == {"a.py": OLD["a.py"], "b.py": ["b.py#eta"]}
    assert latest_ids(store) == ids_by_path(other)
    assert store.file_records()["a.py"].sha256 == "1" * 64  # redone by the next run


def test_a_marker_no_replace_can_explain_is_ignored(store):
    """A marker older than the table's latest commits (left by a process that died, then
    an older rag-lsp wrote), or one that cannot be read, leaves readers on the latest."""
    store, rng = store
    table_dir = store.index_dir / f"{CHUNKS}.lance"
    latest = store._chunks.version  # noqa: SLF001
    write_marker(table_dir, Replacing(7, before=latest - 2, last=latest - 1))
    assert store.version() == latest and ids_by_path(store) == OLD
    (table_dir / MARKER_NAME).write_text("{not json")
    assert store.version() == latest and ids_by_path(store) == OLD
    # a replace whose last commit is in: the table is whole
    write_marker(table_dir, Replacing(8, before=latest - 2, last=latest))
    assert store.version() == latest
    # a version that is not a number
    (table_dir / MARKER_NAME).write_text('{"seq": 9, "before": "3", "last": 99}')
    assert store.version() == latest
    # one that holds: the version before the replace it names
    write_marker(table_dir, Replacing(10, before=latest - 1, last=latest + 1))
    assert store.version() == latest - 1


@pytest.mark.filterwarnings("ignore:optimize.cleanup_older_than=0.")
def test_a_read_whose_version_was_cleaned_up_reads_the_version_it_would_see_now(
        store, tmp_path, monkeypatch):
    """A read takes its version, then a compaction cleans it up before the read's first query
    (only after a long idle, as cleanup goes by a version's age), and another replace is under
    way when the query comes: the read goes on at the version it would see now, the one
    before that replace."""
    store, rng = store
    monkeypatch.setattr(lance_store, "_KEEP_OLD_VERSIONS", timedelta(0))
    other = ChunkStore(tmp_path / "ix", DIM)
    seen: list[dict] = []
    with other.one_version():
        other.version()
        store.replace_files([FileRecord("b.py", 1, 2, "6" * 64, 1)],
                            rows_for("b.py", ["eta"], rng))
        store.optimize()  # cleans up every version but the latest
        chunks = store._chunks  # noqa: SLF001
        delete = chunks.delete

        def watched_delete(where):
            seen.append(ids_by_path(other))
            return delete(where)

        chunks.delete = watched_delete
        store.replace_files([FileRecord("a.py", 1, 2, "3" * 64, 2)],
                            rows_for("a.py", ["beta", "zeta"], rng))
        chunks.delete = delete
    assert seen == [{"a.py": OLD["a.py"], "b.py": ["b.py#eta"]}]


def test_a_read_taken_before_the_full_text_index_was_built_finds_no_words(store, tmp_path):
    """Its version has no full-text index to ask (LanceDB would fail the query)."""
    store, _rng = store
    other = ChunkStore(tmp_path / "ix", DIM)
    with other.one_version():
        other.version()
        store.ensure_fts_index()
        assert other.text_search("alpha", 10) == []
    assert [r["id"] for r in other.text_search("alpha", 10)] == ["a.py#alpha"]


def test_a_restore_that_cannot_be_made_leaves_the_writer_writing(store, monkeypatch, caplog):
    """The version before was cleaned up: the files stay half-replaced until the next run
    redoes them (their records say the old content), and writes go on."""
    store, rng = store
    fail_between_the_commits(store, rng)
    chunks = store._chunks  # noqa: SLF001

    def gone(version):
        chunks.checkout(version)  # what LanceDB's restore does first
        raise ValueError(f"Version {version} no longer exists. Was it cleaned up?")

    monkeypatch.setattr(chunks, "restore", gone)
    store.replace_files([FileRecord("b.py", 1, 2, "6" * 64, 1)], rows_for("b.py", ["eta"], rng))
    assert "the next run mends those files" in caplog.text
    assert read_marker(store.index_dir / f"{CHUNKS}.lance").before is None
    assert latest_ids(store)["b.py"] == ["b.py#eta"] == ids_by_path(store)["b.py"]


def test_a_reader_looks_again_when_a_replace_begins_while_it_looks(tmp_path):
    table_dir = tmp_path
    write_marker(table_dir, Replacing(1))
    calls = []

    def latest_version() -> int:
        if not calls:  # a writer begins its replace of version 10 while this reader looks
            write_marker(table_dir, Replacing(2, before=10, last=12))
            calls.append("begun")
            return 11
        calls.append("again")
        return 11

    assert visible_version(table_dir, latest_version) == 10
    assert calls == ["begun", "again"]
    assert json.loads((table_dir / MARKER_NAME).read_text())["before"] == 10


def test_a_crash_between_the_two_commits_is_mended_by_the_next_run(sample_root, embedder,
                                                                    tmp_path, monkeypatch):
    """Readers stay on the version before; the next write restores it, and the file's record
    still says the old content, so the next run redoes the file and ends as a clean index
    would."""
    settings = Settings.from_dict({"indexPath": str(tmp_path / "ix")})
    ws = Workspace.open(sample_root, settings, embedder=embedder)
    ws.index()
    target = next(p for p in sorted(sample_root.rglob("*.py")))
    rel = target.relative_to(sample_root).as_posix()
    before = ids_by_path(ws._open_store())[rel]  # noqa: SLF001
    # lines moved: every chunk of the file gets a new id, the old ones all go stale
    target.write_text("# moved down a line\n" + target.read_text()
                      + "\n\ndef added_after_the_crash():\n    return 7\n")
    delete = LanceTable.delete

    def power_cut(table, where):
        if table.name == "chunks":  # the upsert has landed, the file records not yet
            raise KeyboardInterrupt("the process dies between the two commits")
        return delete(table, where)

    monkeypatch.setattr(LanceTable, "delete", power_cut)
    with pytest.raises(KeyboardInterrupt):
        ws.update([rel])
    monkeypatch.undo()
    store = ws._open_store()  # noqa: SLF001
    stale = latest_ids(store)[rel]
    assert set(before) < set(stale)  # the new rows had landed beside the old ones
    ws.close()
    ws = Workspace.open(sample_root, settings, embedder=embedder)
    assert ids_by_path(ws._open_store())[rel] == before  # noqa: SLF001 - kept on before
    report = ws.index()
    assert report.files_indexed == 1
    mended = ids_by_path(ws._open_store())[rel]  # noqa: SLF001
    assert mended == latest_ids(ws._open_store())[rel]  # noqa: SLF001
    ws.close()
    fresh = Workspace.open(sample_root, Settings.from_dict(
        {"indexPath": str(tmp_path / "fresh")}), embedder=embedder)
    fresh.index()
    assert mended == ids_by_path(fresh._open_store())[rel]  # noqa: SLF001
    assert any("added_after_the_crash" in h.symbol or "added_after_the_crash" in h.text
               for h in fresh.search("added_after_the_crash", mode="lexical").results)
