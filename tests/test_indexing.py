"""Incremental indexing against a real LanceDB index and the real model."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from types import SimpleNamespace

import pytest

from rag_lsp.config import Settings
from rag_lsp.errors import IndexCorruptError, IndexMismatchError, RagLspError
from rag_lsp.store.manifest import MANIFEST_NAME
from rag_lsp.workspace import Workspace


class EmbedSpy:
    """Counts texts sent to the real embedder."""

    def __init__(self, embedder):
        self.real = embedder.embed
        self.texts: list[str] = []

    def __call__(self, texts, **kwargs):
        self.texts.extend(texts)
        return self.real(texts, **kwargs)


@pytest.fixture
def spy(workspace, monkeypatch):
    spy = EmbedSpy(workspace.embedder)
    monkeypatch.setattr(workspace.embedder, "embed", spy)
    return spy


def paths_in_index(ws: Workspace) -> set[str]:
    return set(ws._open_store().file_records())


def test_git_never_lists_the_index_folder_but_a_users_own_folder_is_left_alone(
        workspace, tmp_path, embedder):
    assert (workspace.index_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    (workspace.index_dir / ".gitignore").unlink()  # an index made by an older rag-lsp
    workspace.index()
    assert (workspace.index_dir / ".gitignore").is_file()

    own = tmp_path / "my-folder"  # given as indexPath, it already held the user's files
    own.mkdir()
    (own / "notes.txt").write_text("mine")
    ws = Workspace.open(workspace.root, Settings(index_path=str(own)), embedder=embedder)
    ws.index()
    ws.index(full=True)
    assert not (own / ".gitignore").exists()


def test_a_deleted_workspace_folder_is_not_made_again_by_a_write(workspace):
    shutil.rmtree(workspace.root)  # the watcher then reports every file deleted
    with pytest.raises(RagLspError, match="no longer exists; nothing was written"):
        workspace.update(["src/http/client.py"])
    assert workspace.compact() is None
    assert not workspace.root.exists()


def test_first_index_embeds_every_file(workspace):
    status = workspace.status()
    assert status.files == 5
    assert status.chunks >= 8
    assert paths_in_index(workspace) == {
        "src/http/client.py", "src/auth/passwords.py", "src/cache/lru.py", "docs/guide.md",
        "web/static/app.js",
    }
    assert (workspace.index_dir / MANIFEST_NAME).is_file()


def test_reindex_without_changes_embeds_nothing(workspace, spy):
    report = workspace.index()
    assert report.files_unchanged == 5
    assert report.files_indexed == 0
    assert spy.texts == []


def test_touched_file_with_same_bytes_is_not_reembedded(workspace, spy, sample_root):
    path = sample_root / "src/cache/lru.py"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    report = workspace.index()
    assert report.files_indexed == 0 and report.files_unchanged == 5
    assert spy.texts == []


def test_editing_one_function_embeds_only_its_new_chunks(workspace, spy, sample_root):
    path = sample_root / "src/auth/passwords.py"
    source = path.read_text(encoding="utf-8")
    path.write_text(source.replace("200_000)\n    return salt", "300_000)\n    return salt"),
                    encoding="utf-8")
    report = workspace.index()
    assert report.files_indexed == 1
    assert report.chunks_embedded == 1 == len(spy.texts)
    assert "300_000" in spy.texts[0] and "def hash_password" in spy.texts[0]
    assert report.chunks_reused >= 2  # the module header and verify_password kept their vectors
    hit = workspace.search("hash a password with a salt", top_k=1).results[0]
    assert hit.path == "src/auth/passwords.py"


def test_deleted_file_disappears_from_search(workspace, sample_root):
    (sample_root / "src/http/client.py").unlink()
    report = workspace.index()
    assert report.files_removed == 1
    assert "src/http/client.py" not in paths_in_index(workspace)
    hits = workspace.search("follow HTTP redirects", threshold=0.0).results
    assert all(h.path != "src/http/client.py" for h in hits)


def test_renamed_file_moves_and_is_found_under_its_new_name(workspace, spy, sample_root):
    (sample_root / "src/cache/lru.py").rename(sample_root / "src/cache/recent.py")
    report = workspace.index()
    assert report.files_removed == 1 and report.files_indexed == 1
    # Each chunk is embedded under a header naming its file, so the moved chunks (only they)
    # are embedded again.
    assert report.chunks_embedded == len(spy.texts) > 0
    assert all(text.startswith("src/cache/recent.py") for text in spy.texts)
    hit = workspace.search("evict the least recently used entry", top_k=1).results[0]
    assert hit.path == "src/cache/recent.py"


def test_without_chunk_headers_a_rename_reuses_every_vector(sample_root, embedder, monkeypatch):
    ws = Workspace.open(sample_root, Settings.from_dict({"chunkHeaders": False}),
                        embedder=embedder)
    ws.index()
    spy = EmbedSpy(embedder)
    monkeypatch.setattr(embedder, "embed", spy)
    (sample_root / "src/cache/lru.py").rename(sample_root / "src/cache/recent.py")
    report = ws.index()
    assert report.files_indexed == 1 and spy.texts == [] and report.chunks_embedded == 0


def test_an_index_of_an_older_format_is_rebuilt_once_by_the_next_run(workspace, spy):
    manifest_path = workspace.index_dir / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "schema_version": 1}))
    reopened = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    assert not reopened.has_index() and reopened.outdated_index() == 1
    with pytest.raises(IndexMismatchError, match="format 1.*rebuilds it"):
        reopened.search("anything")
    steps = []
    report = reopened.index(progress=steps.append)
    # All of it, with progress (vectors of unchanged text come from the shared cache).
    assert report.files_indexed == 5
    assert (report.chunks_embedded + report.chunks_cached + report.chunks_reused
            == report.chunks_written > 0)
    assert steps[-1].phase == "finish" and any(s.phase == "index" for s in steps)
    assert reopened.has_index() and reopened.outdated_index() is None
    assert reopened.index().files_indexed == 0  # once
    assert reopened.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"


def test_update_paths_handles_create_change_delete(workspace, sample_root):
    (sample_root / "src/new_module.py").write_text(
        "def parse_invoice_total(xml):\n    return sum(line.amount for line in xml)\n",
        encoding="utf-8",
    )
    (sample_root / "web/static/app.js").unlink()
    report = workspace.update(["src/new_module.py", "web/static/app.js", "not/there.py"])
    assert report.files_indexed == 1 and report.files_removed == 1
    assert "src/new_module.py" in paths_in_index(workspace)
    assert "web/static/app.js" not in paths_in_index(workspace)
    hit = workspace.search("parse invoice total", top_k=1).results[0]
    assert hit.path == "src/new_module.py"


def fragments(ws: Workspace) -> int:
    return ws._open_store()._chunks.stats()["fragment_stats"]["num_fragments"]  # noqa: SLF001


def test_a_run_with_nothing_to_write_compacts_what_edits_left(workspace, sample_root):
    """Each update writes a fragment; the server asks for a compaction once a burst has
    settled, but one closed before that leaves them, and past a size every search pays for
    each one. The next index run compacts them even though no file changed."""
    from rag_lsp.store.lance_store import MAX_FRAGMENTS

    for edit in range(MAX_FRAGMENTS + 1):  # a new file each time: one fragment each
        (sample_root / f"src/sums_{edit}.py").write_text(
            f"def total_{edit}(xs):\n    return sum(xs) + {edit}\n", encoding="utf-8")
        workspace.update([f"src/sums_{edit}.py"])
    assert fragments(workspace) > MAX_FRAGMENTS
    assert workspace._open_store().needs_optimize()  # noqa: SLF001
    report = workspace.index()
    assert report.files_indexed == 0 and report.chunks_written == 0
    assert fragments(workspace) <= 2
    assert not workspace._open_store().needs_optimize()  # noqa: SLF001
    assert workspace.search(f"total_{MAX_FRAGMENTS}", top_k=1, mode="lexical").results[0].path == \
        f"src/sums_{MAX_FRAGMENTS}.py"


def test_an_edit_leaves_its_fragment_until_a_compaction_is_due(workspace, sample_root,
                                                               monkeypatch):
    """A compaction rewrites the whole chunks table, so runs that wrote a few files leave
    their fragments; their rows are found all the same (in memory, and by LanceDB's own
    full-text search, which reads them unindexed) until enough writes make one due."""
    from rag_lsp.store.lance_store import MAX_FRAGMENTS, ChunkStore

    compactions = []
    real_optimize = ChunkStore.optimize
    monkeypatch.setattr(ChunkStore, "optimize",
                        lambda store, *args: compactions.append(1) or real_optimize(store, *args))
    start = fragments(workspace)
    (sample_root / "src/ledger.py").write_text(
        "def reconcile_quarterly_ledger(rows):\n    return sum(rows)\n", encoding="utf-8")
    report = workspace.index()
    assert report.files_indexed == 1 and not compactions
    assert fragments(workspace) == start + 1
    workspace.compact()  # what the server asks once edits settle: not due yet
    assert not compactions and fragments(workspace) == start + 1
    hit = workspace.search("reconcile_quarterly_ledger", top_k=1, mode="lexical").results[0]
    assert hit.path == "src/ledger.py"
    store = workspace._open_store()  # noqa: SLF001
    # A filter keeps the in-memory postings out of it: LanceDB's full-text search answers.
    rows = store.text_search("reconcile_quarterly_ledger", 3, "language = 'python'")
    assert rows and rows[0]["path"] == "src/ledger.py"

    for edit in range(MAX_FRAGMENTS - fragments(workspace) + 1):  # a fragment each
        (sample_root / f"src/ledger_{edit}.py").write_text(
            f"def quarter_{edit}(rows):\n    return sum(rows) + {edit}\n", encoding="utf-8")
        workspace.update([f"src/ledger_{edit}.py"])
    assert fragments(workspace) > MAX_FRAGMENTS
    assert not compactions  # updates never compact; the settle does, once due
    times = workspace.compact()  # how long it took, for the server's log
    assert compactions == [1] and fragments(workspace) <= 2
    assert times.seconds > 0 and times.training_seconds is None  # too small for an ANN index
    assert workspace.compact(force=True)  # due or not
    assert compactions == [1, 1]


def test_deleted_rows_past_a_share_make_a_compaction_due(workspace, sample_root):
    """Removing files writes no fragment, only masks their rows: past a share of the
    stored rows masked, a compaction is due all the same."""
    from rag_lsp.store.lance_store import DELETED_MAX_SHARE

    store = workspace._open_store()  # noqa: SLF001
    assert not store.needs_optimize()
    files = sorted(store.file_records().items(), key=lambda item: -item[1].chunks)
    total = store.count_chunks()
    removed = 0
    for path, record in files:
        if removed > DELETED_MAX_SHARE * total:
            break
        assert not store.needs_optimize()
        (sample_root / path).unlink()
        workspace.update([path])
        removed += record.chunks
    assert workspace._open_store().needs_optimize()  # noqa: SLF001
    workspace.compact()
    assert not workspace._open_store().needs_optimize()  # noqa: SLF001


def test_rows_outside_the_full_text_index_past_a_number_make_a_compaction_due(
        workspace, sample_root, monkeypatch):
    """LanceDB's full-text search reads every row its index does not cover at each query:
    past a number of them a compaction is due, and past the size where searches answer
    from memory, from the first."""
    from rag_lsp.store import lance_store

    monkeypatch.setattr(lance_store, "MAX_UNINDEXED_ROWS", 3)
    store = workspace._open_store()  # noqa: SLF001
    functions = "".join(f"def step_{n}(x):\n    return x + {n}\n\n\n" for n in range(3))
    (sample_root / "src/steps.py").write_text(functions, encoding="utf-8")
    workspace.update(["src/steps.py"])
    assert 0 < store._unindexed_rows() <= 3  # noqa: SLF001
    assert not store.needs_optimize()
    monkeypatch.setattr(lance_store, "POSTINGS_MAX_ROWS", 0)  # as past 50k chunks
    assert store.needs_optimize()
    monkeypatch.undo()
    (sample_root / "src/more_steps.py").write_text(functions.replace("step_", "more_"),
                                                   encoding="utf-8")
    monkeypatch.setattr(lance_store, "MAX_UNINDEXED_ROWS", 3)
    workspace.update(["src/more_steps.py"])
    assert store._unindexed_rows() > 3 and store.needs_optimize()  # noqa: SLF001
    workspace.compact()
    assert store._unindexed_rows() == 0  # noqa: SLF001


def test_past_the_postings_size_a_run_folds_larger_batches_each(workspace, sample_root,
                                                                 monkeypatch, caplog):
    """Past POSTINGS_MAX_ROWS chunks every lexical search reads the rows outside LanceDB's
    full-text index one by one: there a run embeds LARGE_INDEX_BATCH_CHUNKS chunks a batch,
    writes them in groups of WRITE_BATCH_CHUNKS back to back, and folds each full batch in
    at once, searched or not (a save's few chunks wait for the compaction after saves
    settle); below it, batches of WRITE_BATCH_CHUNKS, folded every OPTIMIZE_EVERY_BATCHES."""
    from rag_lsp.indexing import indexer as indexer_module
    from rag_lsp.store import lance_store

    monkeypatch.setattr(indexer_module, "WRITE_BATCH_CHUNKS", 1)  # a group a file
    monkeypatch.setattr(indexer_module, "LARGE_INDEX_BATCH_CHUNKS", 2)  # two files a batch
    steps: list[str] = []  # "embed N", "write N", "fold" in their order
    optimize = lance_store.ChunkStore.optimize
    replace_files = lance_store.ChunkStore.replace_files
    embed = workspace.embedder.embed

    def counted_fold(self, *args, **kwargs):
        steps.append(f"fold {self._unindexed_rows()}")  # noqa: SLF001
        return optimize(self, *args, **kwargs)

    def counted_write(self, records, rows, *args, **kwargs):
        steps.append(f"write {len(records)}")
        return replace_files(self, records, rows, *args, **kwargs)

    def counted_embed(texts, *args, **kwargs):
        steps.append(f"embed {len(texts)}")
        return embed(texts, *args, **kwargs)

    monkeypatch.setattr(lance_store.ChunkStore, "optimize", counted_fold)
    monkeypatch.setattr(lance_store.ChunkStore, "replace_files", counted_write)
    monkeypatch.setattr(workspace.embedder, "embed", counted_embed)

    def write_run(prefix: str) -> None:
        for n in range(4):  # one chunk a file
            (sample_root / f"src/{prefix}_{n}.py").write_text(
                f"def {prefix}_step_{n}(x):\n    return x + {n}\n", encoding="utf-8")
        steps.clear()
        assert workspace.index().files_indexed == 4

    write_run("small")
    assert steps[:7] == ["embed 1", "write 1"] * 3 + ["embed 1"]
    assert steps[7] == "write 1" and steps[8].startswith("fold ")  # the fourth batch
    monkeypatch.setattr(lance_store, "POSTINGS_MAX_ROWS", 0)  # as past 50k chunks
    caplog.set_level(logging.INFO, logger="rag_lsp.indexing.indexer")
    write_run("large")  # nobody searches: the same
    assert steps == ["embed 2", "write 1", "write 1", "fold 2"] * 2
    # Each fold is logged with how long it took (the server's log: see CompactionTimes)
    folds = [r.getMessage() for r in caplog.records if "index compacted in" in r.getMessage()]
    assert len(folds) == 2, folds
    assert all(re.fullmatch(rf"{sample_root.name}: index compacted in \d+ ms while indexing",
                            fold) for fold in folds), folds
    store = workspace._open_store()  # noqa: SLF001
    assert store._unindexed_rows() == 0  # noqa: SLF001
    assert workspace.search("large_step_3", top_k=1, mode="lexical").results[0].path == (
        "src/large_3.py")
    # A save's few chunks wait for the compaction the server asks for once saves settle.
    (sample_root / "src/large_0.py").write_text("def saved_step(x):\n    return x\n",
                                                encoding="utf-8")
    steps.clear()
    workspace.update(["src/large_0.py"])
    assert steps == ["embed 1", "write 1"]
    assert store._unindexed_rows() > 0  # noqa: SLF001
    assert workspace.search("saved_step", top_k=1, mode="lexical").results[0].path == (
        "src/large_0.py")
    workspace.compact()
    assert steps[-1].startswith("fold ") and store._unindexed_rows() == 0  # noqa: SLF001


def test_a_run_that_folded_batches_ends_asking_for_one_segment(workspace, sample_root,
                                                               monkeypatch):
    """Each fold of a run adds a segment to the ANN index, which every vector query searches:
    a run that folded batches of its own ends with the index trained again as one (its last
    compaction asks for one segment); a run that folded none, as a save's, asks for the
    usual MAX_SEGMENTS (None)."""
    from rag_lsp.indexing import indexer as indexer_module
    from rag_lsp.store import lance_store

    monkeypatch.setattr(indexer_module, "WRITE_BATCH_CHUNKS", 1)
    monkeypatch.setattr(indexer_module, "LARGE_INDEX_BATCH_CHUNKS", 2)
    asked: list[int | None] = []
    optimize = lance_store.ChunkStore.optimize

    def noted(self, *args, max_segments=None, **kwargs):
        asked.append(max_segments)
        return optimize(self, *args, max_segments=max_segments, **kwargs)

    monkeypatch.setattr(lance_store.ChunkStore, "optimize", noted)
    monkeypatch.setattr(lance_store.ChunkStore, "needs_vector_index",
                        lambda self, max_segments=None: max_segments == 1)  # as if 2 or more
    monkeypatch.setattr(lance_store, "POSTINGS_MAX_ROWS", 0)  # as past 50k chunks
    for n in range(3):  # one chunk a file: a batch of two folded as written, then one
        (sample_root / f"src/fold_{n}.py").write_text(f"def fold_{n}(x):\n    return x\n",
                                                      encoding="utf-8")
    workspace.index()
    assert asked == [None, 1]  # the batch's fold, then the run's end
    # A run whose last batch was folded as written has nothing left to fold (nothing else
    # due either, here): it still ends trained as one segment.
    asked.clear()
    for n in range(4):  # two full batches, each folded as written
        (sample_root / f"src/full_{n}.py").write_text(f"def full_{n}(x):\n    return x\n",
                                                      encoding="utf-8")
    with monkeypatch.context() as nothing_due:
        nothing_due.setattr(lance_store.ChunkStore, "needs_optimize", lambda self: False)
        workspace.index()
    assert asked == [None, None, 1]
    asked.clear()
    (sample_root / "src/fold_0.py").write_text("def fold_again(x):\n    return x\n",
                                                encoding="utf-8")
    workspace.index()  # one file: a batch of one, no fold before the end
    assert asked == [None]


def test_a_large_batch_is_written_in_groups_of_whole_files():
    """A batch past the size is written in groups of at least the given chunks, a file never
    split, every file once and in order; the last group may be smaller."""
    from rag_lsp.indexing.indexer import _write_groups

    def item(name: str, chunks: int):
        return SimpleNamespace(name=name, chunks=[object()] * chunks)

    pending = [item("a", 1), item("b", 2), item("c", 5), item("d", 1), item("e", 1)]
    groups = [[i.name for i in group] for group in _write_groups(pending, 3)]
    assert groups == [["a", "b"], ["c"], ["d", "e"]]
    # At least, not at most: two files of 2 go together rather than one a group.
    two = [item("a", 2), item("b", 2)]
    assert [[i.name for i in g] for g in _write_groups(two, 3)] == [["a", "b"]]
    assert [[i.name for i in g] for g in _write_groups(pending[:1], 3)] == [["a"]]
    assert list(_write_groups([], 3)) == []


def test_a_first_index_growing_past_the_size_takes_larger_batches_from_then_on(
        workspace, sample_root, monkeypatch):
    """The batch size is chosen again after each write, so a run that takes the index past
    POSTINGS_MAX_ROWS gathers LARGE_INDEX_BATCH_CHUNKS chunks a batch from then on."""
    from rag_lsp.indexing import indexer as indexer_module
    from rag_lsp.store import lance_store

    monkeypatch.setattr(indexer_module, "WRITE_BATCH_CHUNKS", 1)
    monkeypatch.setattr(indexer_module, "LARGE_INDEX_BATCH_CHUNKS", 2)
    store = workspace._open_store()  # noqa: SLF001
    # The size is the index as it stands: past it once the first new file is written.
    monkeypatch.setattr(lance_store, "POSTINGS_MAX_ROWS", store.count_chunks())
    embedded: list[int] = []
    embed = workspace.embedder.embed

    def counted_embed(texts, *args, **kwargs):
        embedded.append(len(texts))
        return embed(texts, *args, **kwargs)

    monkeypatch.setattr(workspace.embedder, "embed", counted_embed)
    for n in range(5):  # one chunk a file
        (sample_root / f"src/grow_{n}.py").write_text(
            f"def grow_step_{n}(x):\n    return x * {n}\n", encoding="utf-8")
    assert workspace.index().files_indexed == 5
    assert embedded == [1, 2, 2]


def test_a_run_that_fails_between_two_groups_of_a_batch_is_completed_by_the_next(
        workspace, sample_root, monkeypatch):
    """A batch past the size is several replaces: when one fails, the groups written before
    it stand (chunks and file records together), and the next run writes the rest, with no
    chunk twice and nothing left outside the full-text index."""
    from rag_lsp.indexing import indexer as indexer_module
    from rag_lsp.store import lance_store

    monkeypatch.setattr(indexer_module, "WRITE_BATCH_CHUNKS", 1)
    monkeypatch.setattr(indexer_module, "LARGE_INDEX_BATCH_CHUNKS", 4)
    monkeypatch.setattr(lance_store, "POSTINGS_MAX_ROWS", 0)  # as past 50k chunks
    replace_files = lance_store.ChunkStore.replace_files
    calls = []

    def failing_second(self, records, rows, *args, **kwargs):
        calls.append([record.path for record in records])
        if len(calls) == 2:
            raise OSError("disk full (a test)")
        return replace_files(self, records, rows, *args, **kwargs)

    monkeypatch.setattr(lance_store.ChunkStore, "replace_files", failing_second)
    names = [f"src/split_{n}.py" for n in range(4)]
    for n, name in enumerate(names):  # one chunk a file
        (sample_root / name).write_text(f"def split_step_{n}(x):\n    return x - {n}\n",
                                        encoding="utf-8")
    with pytest.raises(OSError, match=r"disk full \(a test\)"):
        workspace.index()
    store = workspace._open_store()  # noqa: SLF001
    written = set(calls[0])
    assert len(written) == 1 and written <= set(names)
    assert set(names) & paths_in_index(workspace) == written  # the first group stands
    monkeypatch.setattr(lance_store.ChunkStore, "replace_files", replace_files)
    assert workspace.index().files_indexed == 3  # the rest, not the group written
    assert set(names) <= paths_in_index(workspace)
    rows = store.chunk_rows("true", ["id", "path"])
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids))
    assert sorted(row["path"] for row in rows if row["path"] in names) == sorted(names)
    assert store._unindexed_rows() == 0  # (folded when the run ends)  # noqa: SLF001
    for n, name in enumerate(names):
        hits = workspace.search(f"split_step_{n}", top_k=1, mode="lexical").results
        assert hits[0].path == name


def test_a_file_saved_again_and_again_makes_a_compaction_due(workspace, sample_root,
                                                              monkeypatch):
    """Saving one file over and over leaves no fragment (its last rows' fragment is dropped
    whole) and masks few rows, but every save leaves a version on disk: past a number of
    them that the cleanup would delete, a compaction is due."""
    from datetime import timedelta

    from rag_lsp.store import lance_store

    monkeypatch.setattr(lance_store, "_KEEP_OLD_VERSIONS", timedelta(milliseconds=1))
    monkeypatch.setattr(lance_store, "MAX_OLD_VERSIONS", 6)
    target = sample_root / "src/ledger.py"
    saves = 0
    while not workspace._open_store().needs_optimize():  # noqa: SLF001
        saves += 1
        assert saves <= 8, "the saves' versions never made a compaction due"
        target.write_text(f"def quarter(rows):\n    return sum(rows) + {saves}\n",
                          encoding="utf-8")
        workspace.update(["src/ledger.py"])
    assert fragments(workspace) <= 3 and saves > 1
    workspace.compact()
    assert not workspace._open_store().needs_optimize()  # noqa: SLF001


def test_rewrites_with_the_same_bytes_make_a_compaction_due(workspace, sample_root):
    """A file rewritten with the same bytes changes only its record in the files table (a
    fragment there each time), which every run reads whole."""
    from rag_lsp.store.lance_store import MAX_FRAGMENTS

    paths = [f"src/extra_{n}.py" for n in range(MAX_FRAGMENTS)]  # one fragment more, each
    for n, path in enumerate(paths):
        (sample_root / path).write_text(f"def extra_{n}():\n    return {n}\n", encoding="utf-8")
    workspace.index()
    workspace.compact(force=True)
    store = workspace._open_store()  # noqa: SLF001
    for touch, path in enumerate(paths):  # distinct files: a record each in a fragment of its own
        assert not store.needs_optimize()
        stat = (sample_root / path).stat()
        os.utime(sample_root / path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
        report = workspace.update([path])
        assert report.files_indexed == 0, touch
    assert workspace._open_store().needs_optimize()  # noqa: SLF001
    workspace.compact()
    assert not workspace._open_store().needs_optimize()  # noqa: SLF001


def test_paths_with_quotes_are_indexed_updated_and_removed(workspace, sample_root):
    odd = sample_root / "src" / "it's \"odd\".py"
    odd.write_text("def quoted_path_function():\n    return 'o''k'\n", encoding="utf-8")
    workspace.index()
    assert "src/it's \"odd\".py" in paths_in_index(workspace)
    odd.write_text("def quoted_path_function():\n    return 2\n", encoding="utf-8")
    assert workspace.index().files_indexed == 1
    odd.unlink()
    assert workspace.index().files_removed == 1
    assert "src/it's \"odd\".py" not in paths_in_index(workspace)


def test_a_file_name_that_is_not_utf8_is_skipped_not_fatal(workspace, sample_root):
    bad = os.path.join(os.fsencode(sample_root / "src"), b"r\xe9sum\xe9.py")
    with open(bad, "w") as f:
        f.write("def undecodable_name_function():\n    return 1\n")
    report = workspace.index()
    assert report.files_skipped.get("undecodable-name") == 1
    assert workspace.update([os.fsdecode(bad)]).files_skipped.get("undecodable-name") == 1
    assert workspace.index().files_skipped.get("undecodable-name") == 1  # every run, no error
    assert workspace.search("follow redirects").results  # the rest is indexed and served


def test_binary_and_oversized_files_are_skipped_and_reported(sample_root, embedder):
    (sample_root / "blob.txt").write_bytes(b"\x00\x01\x02" * 100)
    (sample_root / "huge.txt").write_text("word " * 5000, encoding="utf-8")
    (sample_root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    ws = Workspace.open(sample_root, Settings.from_dict({"maxFileBytes": 10_000}),
                        embedder=embedder)
    report = ws.index()
    assert report.files_skipped.get("binary") == 1
    assert report.files_skipped.get("too-large") == 1
    assert "latin1.txt" in paths_in_index(ws)  # decoded with replacement, still indexed


def test_index_from_another_model_is_refused_with_the_fix(workspace):
    manifest_path = workspace.index_dir / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest.update(model_id="other/model-768", dimension=768)
    manifest_path.write_text(json.dumps(manifest))
    reopened = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    with pytest.raises(IndexMismatchError) as info:
        reopened.search("anything")
    message = str(info.value)
    assert "other/model-768" in message and "dims 768" in message and "dims 384" in message
    assert "rag-lsp index --full" in message
    report = reopened.index(full=True)
    assert report.files_indexed == 5
    assert reopened.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"


def test_corrupt_manifest_is_reported_and_full_rebuilds(workspace):
    (workspace.index_dir / MANIFEST_NAME).write_text("{not json")
    reopened = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    damaged = reopened.status()  # the status says so, with the fix, rather than failing
    assert not damaged.indexed and "rag-lsp index --full" in damaged.index_problem
    assert reopened.index(full=True).files_indexed == 5
    assert reopened.status().files == 5 and reopened.status().index_problem is None


def test_an_index_path_that_is_a_file_is_a_clear_error(sample_root, embedder):
    (sample_root / ".rag-lsp").write_text("not a folder", encoding="utf-8")
    ws = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    with pytest.raises(RagLspError, match="exists but is not a folder.*indexPath"):
        ws.index()
    assert (sample_root / ".rag-lsp").read_text(encoding="utf-8") == "not a folder"


def test_missing_table_is_damage_not_an_empty_index(workspace):
    import shutil

    shutil.rmtree(workspace.index_dir / "chunks.lance")
    reopened = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    with pytest.raises(IndexCorruptError, match="chunks is missing.*index --full"):
        reopened.search("follow redirects")
    report = reopened.index()  # rebuilt by itself, never taken for an empty index
    assert report.files_indexed == 5 and "chunks is missing" in report.rebuilt_because
    assert reopened.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"


def test_search_never_creates_an_index(sample_root, embedder):
    ws = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    with pytest.raises(RagLspError, match="no index .* Run `rag-lsp index"):
        ws.search("anything")
    assert not ws.has_index()


def test_update_accepts_any_spelling_of_a_path_and_deleted_folders(workspace, sample_root):
    path = sample_root / "src/http/client.py"
    path.write_text(path.read_text().replace("MAX_HOPS = 5", "MAX_HOPS = 7"))
    workspace.update(["./src/http/client.py"])
    workspace.update([str(path)])  # absolute, as file watchers report
    assert sorted(paths_in_index(workspace)) == sorted({
        "src/http/client.py", "src/auth/passwords.py", "src/cache/lru.py", "docs/guide.md",
        "web/static/app.js"})
    workspace.update([str(sample_root), "."])  # the root itself: no file to act on
    assert len(paths_in_index(workspace)) == 5
    import shutil

    shutil.rmtree(sample_root / "src")
    report = workspace.update(["src"])
    assert report.files_removed == 3
    assert paths_in_index(workspace) == {"docs/guide.md", "web/static/app.js"}


def test_a_folder_moved_or_created_is_indexed_from_its_event_alone(workspace, sample_root):
    """Editors and watchers may report a moved folder by its two paths only, and a folder
    copied in by its own path: its files are found by scanning it (they were lost until the
    next full run)."""
    import shutil

    shutil.move(sample_root / "src/cache", sample_root / "src/store")
    report = workspace.update(["src/cache", str(sample_root / "src/store")])
    assert (report.files_indexed, report.files_removed) == (1, 1)
    assert "src/store/lru.py" in paths_in_index(workspace)
    assert "src/cache/lru.py" not in paths_in_index(workspace)
    assert workspace.search("LRUCache", mode="lexical").results[0].path == "src/store/lru.py"
    shutil.copytree(sample_root / "src/auth", sample_root / "vendored/auth")
    (sample_root / "vendored/node_modules/x").mkdir(parents=True)
    (sample_root / "vendored/node_modules/x/index.js").write_text("function ledgerx() {}\n")
    assert workspace.update(["vendored"]).files_indexed == 1  # excluded folders stay out
    assert "vendored/auth/passwords.py" in paths_in_index(workspace)
    assert workspace.update(["vendored/node_modules"]).files_indexed == 0
    assert workspace.update(["src/store"]).files_indexed == 0  # nothing new: nothing done
    assert len(paths_in_index(workspace)) == 6


def test_an_event_beneath_a_linked_folder_is_not_followed_out(workspace, sample_root,
                                                               tmp_path):
    """The scan never goes into a linked folder; an event naming a file beneath one (a
    watcher's, a save's) had indexed the link's target, a file outside the workspace."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("def leak():\n    return 'zebracorn'\n")
    (sample_root / "linked").symlink_to(outside, target_is_directory=True)
    report = workspace.update([str(sample_root / "linked/secret.py"), "linked"])
    assert report.files_indexed == 0 and report.files_skipped.get("symlink-dir") == 1
    assert not any(p.startswith("linked") for p in paths_in_index(workspace))
    assert workspace.search("zebracorn", mode="lexical").results == []


def test_a_folder_replaced_by_a_file_of_its_name_takes_its_files_out(workspace, sample_root):
    import shutil

    shutil.rmtree(sample_root / "src/auth")
    (sample_root / "src/auth").write_text("def authenticate():\n    return True\n")
    report = workspace.update(["src/auth"])  # one event, for the path that changed kind
    assert report.files_removed == 1
    assert "src/auth/passwords.py" not in paths_in_index(workspace)
    found = workspace.search("hash a password", mode="lexical", threshold=0.0).results
    assert "src/auth/passwords.py" not in {r.path for r in found}


def test_what_a_run_skipped_is_named_in_the_log(workspace, sample_root, caplog):
    (sample_root / "dangling.py").symlink_to(sample_root / "nowhere.py")
    (sample_root / "odd\nname.bin.py").write_bytes(b"\0binary")
    with caplog.at_level(logging.INFO, logger="rag_lsp.indexing.indexer"):
        report = workspace.index()
    assert report.files_skipped.get("broken-symlink") == 1
    assert "skipped (broken-symlink): 'dangling.py'" in caplog.text
    assert "skipped (binary): 'odd\\nname.bin.py'" in caplog.text  # one line, as named


def test_a_name_with_a_backslash_is_followed_by_its_events(workspace, sample_root):
    """On Linux and macOS a backslash is part of a name: it was read as a folder separator,
    so the event named a file that does not exist and the old text stayed."""
    odd = sample_root / "back\\slash.py"
    odd.write_text("def first_version():\n    return 'okapi'\n")
    workspace.update([str(odd)])
    assert "back\\slash.py" in paths_in_index(workspace)
    odd.write_text("def second_version():\n    return 'pangolin'\n")
    workspace.update([str(odd)])
    assert workspace.search("pangolin", mode="lexical").results[0].path == "back\\slash.py"
    assert workspace.search("okapi", mode="lexical", threshold=0.0).results == []


def test_update_into_an_empty_index_is_searchable_lexically(tmp_path, embedder):
    root = tmp_path / "empty"
    root.mkdir()
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    (root / "notes.md").write_text("# Notes\n\nThe frobnicator reticulates splines.\n")
    ws.update(["notes.md"])
    assert ws.search("frobnicator", mode="lexical").results[0].path == "notes.md"


def test_changed_chunk_settings_rechunk_every_file_once(workspace):
    before = workspace.status().chunks
    smaller = Settings.from_dict({"chunkTokens": 40, "chunkOverlapTokens": 8})
    reopened = Workspace.open(workspace.root, smaller, embedder=workspace.embedder)
    report = reopened.index()
    assert report.files_indexed == 5 and reopened.status().chunks > before
    assert reopened.index().files_indexed == 0  # recorded: the next run skips again


def test_a_new_chunker_rechunks_once_and_reuses_unchanged_chunks(sample_root, embedder,
                                                                 monkeypatch):
    # An index written before the structural chunker: JavaScript and Python in windows.
    import rag_lsp.chunking as chunking
    from rag_lsp.chunking import CHUNKER_VERSION

    monkeypatch.setattr(chunking, "grammar_for", lambda language, path="": None)
    old = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    old.index()
    manifest_path = old.index_dir / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest["chunking"]["chunker"] = CHUNKER_VERSION - 1
    manifest_path.write_text(json.dumps(manifest))
    assert {r.kind for r in old.search("debounce", mode="lexical").results} == {"text"}
    monkeypatch.undo()

    upgraded = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    spy = EmbedSpy(embedder)
    monkeypatch.setattr(embedder, "embed", spy)
    report = upgraded.index()
    assert report.files_indexed == 5  # every file re-chunked, by the run itself…
    assert report.chunks_reused > 0  # …and only chunks whose text changed are embedded:
    assert spy.texts and not any(t.startswith("docs/") for t in spy.texts)  # Markdown kept
    hit = upgraded.search("debounce", mode="lexical").results[0]
    assert (hit.path, hit.kind, hit.symbol) == ("web/static/app.js", "function", "debounce")
    assert upgraded.index().files_indexed == 0  # once


def test_minified_code_is_skipped_and_reported(sample_root, embedder):
    bundle = ";".join(f"var a{i}=function(b){{return b*{i}}}" for i in range(2_000))
    (sample_root / "web/static/vendor.min.js").write_text(bundle + "\n", encoding="utf-8")
    long_prose = "\n\n".join(["A paragraph of prose on one long line. " * 20] * 40)
    (sample_root / "docs/unwrapped.md").write_text(long_prose, encoding="utf-8")
    ws = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    report = ws.index()
    assert report.files_skipped.get("minified") == 1
    assert "web/static/vendor.min.js" not in paths_in_index(ws)
    assert "docs/unwrapped.md" in paths_in_index(ws)  # long lines of prose are kept


def test_gitignored_files_are_not_indexed(sample_root, embedder):
    (sample_root / ".gitignore").write_text("docs/\n", encoding="utf-8")
    ws = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    assert "docs/guide.md" not in paths_in_index(ws)
    assert not any(p.startswith(".rag-lsp") for p in paths_in_index(ws))


def test_progress_reports_counts_that_end_at_the_totals(sample_root, embedder):
    events = []
    ws = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    report = ws.index(progress=events.append)
    phases = [e.phase for e in events]
    assert phases[0] == "scan" and phases[-1] == "finish"
    last = [e for e in events if e.phase == "index"][-1]
    assert (last.files_done, last.files_total) == (5, 5)
    assert last.chunks_embedded == report.chunks_embedded > 0


def test_damaged_index_is_reported_and_rebuilt_on_request(workspace):
    for data_file in (workspace.index_dir / "chunks.lance" / "data").iterdir():
        data_file.unlink()
    reopened = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    with pytest.raises(IndexCorruptError, match="damaged.*rag-lsp index --full"):
        reopened.search("follow redirects")
    report = reopened.index()  # no --full needed: a damaged index is rebuilt by itself
    assert report.files_indexed == 5 and "damaged" in report.rebuilt_because
    assert reopened.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"


def test_a_corrupt_manifest_is_rebuilt_by_the_next_index_run(workspace):
    (workspace.index_dir / MANIFEST_NAME).write_text("{not json")
    reopened = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    report = reopened.index()
    assert report.files_indexed == 5 and "unreadable" in report.rebuilt_because
    assert reopened.status().files == 5


def test_searches_keep_working_through_full_rebuilds(workspace):
    import threading

    errors: list[Exception] = []
    answered: list[int] = []
    stop = threading.Event()

    def search_loop():
        while not stop.is_set():
            try:
                answered.append(len(workspace.search("password", threshold=0.0).results))
            except Exception as exc:  # noqa: BLE001 - any failure is what this test looks for
                errors.append(exc)

    searcher = threading.Thread(target=search_loop)
    searcher.start()
    try:
        for _ in range(3):
            workspace.index(full=True)
    finally:
        stop.set()
        searcher.join()
    assert errors == [] and answered


def test_the_index_folder_is_private_to_its_owner(sample_root, embedder):
    index_dir = Settings().index_dir(sample_root)
    index_dir.mkdir(mode=0o755)  # left open by an older version
    os.chmod(index_dir, 0o755)
    Workspace.open(sample_root, Settings(), embedder=embedder).index()
    assert index_dir.stat().st_mode & 0o777 == 0o700
    assert (index_dir / MANIFEST_NAME).stat().st_mode & 0o777 == 0o600


def test_a_renamed_file_changes_names_in_one_step(workspace, sample_root):
    """The old name's chunks go in the replace that adds the new name's: a search between
    two steps would find the file twice (or, the other way round, not at all). The replace
    is two commits readers see as one (tests/test_replace_files.py)."""
    store = workspace._open_store()
    old_path, new_path = "src/auth/passwords.py", "src/auth/hashing.py"
    (sample_root / old_path).rename(sample_root / new_path)
    before = store.version()
    report = workspace.update([old_path, new_path])
    assert report.files_indexed == 1 and report.files_removed == 1
    assert store.version() == before + 2  # the upsert, then the delete
    paths = {r.path for r in workspace.search("password hashing", threshold=0.0).results}
    assert new_path in paths and old_path not in paths
    assert old_path not in paths_in_index(workspace) and new_path in paths_in_index(workspace)
