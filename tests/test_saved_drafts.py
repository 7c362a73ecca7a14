"""A saved file is searchable by its words before its update lands (``Workspace.draft_saved``,
and the server drafting each burst of file events): its update may wait behind a write under
way, which at 100k chunks took up to 38 s. Real model, real LanceDB; the server in this
process, with its writer thread held inside a write.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from pathlib import Path

import pytest

from rag_lsp.agents.keeper import READY, WorkspaceKeeper
from rag_lsp.config import Settings
from rag_lsp.errors import IndexCorruptError
from rag_lsp.indexing.file_text import DRAFT_SAVED_MAX_FILES, draft_saved
from rag_lsp.indexing.indexer import Indexer
from rag_lsp.indexing.scan import WorkspaceFilter
from rag_lsp.search import pipeline
from rag_lsp.search.ranking import Candidate
from rag_lsp.search.results import SearchFilters
from rag_lsp.store.draft import DraftIndex
from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.workspace import Workspace
from tests.conftest import make_sample_root, write_files
from tests.inprocess_lsp import WAIT_SECONDS, InProcessServer

LRU = "src/cache/lru.py"
PASSWORDS = "src/auth/passwords.py"


def _held(ws: Workspace) -> int:
    """Files the workspace's draft holds, saved ones included (``drafted_files`` counts the
    new files of a run only)."""
    return len(ws._draft)  # noqa: SLF001


async def _until_none_held(ws: Workspace) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while _held(ws):
        assert time.monotonic() < deadline, "a draft outlived the updates"
        await asyncio.sleep(0.02)


def _paths(ws: Workspace, query: str, **params) -> list[str]:
    return [r.path for r in ws.search(query, **params).results]


def _symbols(ws: Workspace, query: str) -> set[str]:
    """The symbols of a lexical search's line ranges (a drafted window has none)."""
    return {r.symbol for hit in ws.search(query, mode="lexical").results
            for r in [hit, *hit.ranges]}


def _save_renamed(root: Path) -> None:
    """LRUCache becomes RecencyCache, and a new function is appended."""
    path = root / LRU
    path.write_text(path.read_text().replace("LRUCache", "RecencyCache")
                    + "\n\ndef rebalance_ledger_quota(ledger):\n"
                      '    """Spread the ledger quota evenly."""\n    return ledger\n')


def test_a_saved_file_answers_by_its_new_words_until_its_update_lands(workspace: Workspace):
    _save_renamed(workspace.root)
    assert workspace.draft_saved([LRU]) == [LRU]
    found = workspace.search("rebalance_ledger_quota", mode="lexical").results
    assert found and found[0].path == LRU and found[0].kind == "text"  # a drafted window
    assert LRU in _paths(workspace, "rebalance the ledger quota")  # hybrid too
    # Its stored chunks are of the old text: words find nothing of them any more…
    assert "LRUCache" not in _symbols(workspace, "LRUCache")
    assert LRU in _paths(workspace, "RecencyCache", mode="lexical")
    # …while a vector search has only their meaning to go by.
    assert LRU in _paths(workspace, "cache that evicts the least recently used entry",
                         mode="vector")
    workspace.update([LRU])
    assert _held(workspace) == 0
    found = workspace.search("rebalance_ledger_quota", mode="lexical").results
    assert found[0].path == LRU and found[0].symbol == "rebalance_ledger_quota"  # its chunk
    assert "RecencyCache" in _symbols(workspace, "RecencyCache")


def test_what_a_saved_file_still_holds_keeps_its_meaning_until_its_update_lands(
        workspace: Workspace):
    """Its stored chunks whose text is unchanged stay found, with their vectors, at the lines
    that text is at now; only the rest of the file is drafted."""
    query = "cache that evicts the least recently used entry"
    before = workspace.search(query).results[0]
    assert (before.path, before.kind, before.symbol) == (LRU, "class", "LRUCache")
    path = workspace.root / LRU
    path.write_text(path.read_text().replace(
        "class LRUCache", "# Caches for the HTTP client.\n# (see src/http)\nclass LRUCache")
        + "\n\ndef rebalance_ledger_quota(ledger):\n    return ledger\n")
    assert workspace.draft_saved([LRU]) == [LRU]
    lines = path.read_text().split("\n")
    for mode in ("hybrid", "lexical"):
        found = workspace.search(query if mode == "hybrid" else "LRUCache", mode=mode).results
        assert (found[0].path, found[0].kind, found[0].symbol) == (LRU, "class", "LRUCache")
        assert (found[0].start_line, found[0].end_line) == (before.start_line + 2,
                                                            before.end_line + 2), mode
        assert lines[found[0].start_line - 1] == "class LRUCache:"
    # As well found as before the save (its own vector, not the words of a window; the new
    # comment about caches is one more place that answers).
    assert workspace.search(query).results[0].score >= before.score - 1e-4
    # So does a vector search, and the span a context takes of the class.
    found = workspace.search(query, mode="vector").results[0]
    assert (found.path, found.start_line) == (LRU, before.start_line + 2)
    assert workspace.definition_span(LRU, "LRUCache") == (before.start_line + 2,
                                                           before.end_line + 2)
    # The new lines are drafted, and nothing else of the file.
    (window,) = [hit for hit in workspace.search("rebalance_ledger_quota",
                                                  mode="lexical").results if hit.path == LRU]
    assert window.kind == "text" and window.start_line > before.end_line + 2
    assert "LRUCache" not in window.snippet and "rebalance_ledger_quota" in window.snippet
    workspace.update([LRU])
    assert _held(workspace) == 0
    after = workspace.search(query).results[0]  # (its chunk now takes in the comment above)
    assert after.symbol == "LRUCache" and after.start_line <= before.start_line + 2


def test_a_save_is_found_by_its_words_before_its_stored_chunks_are_read(
        workspace: Workspace, monkeypatch):
    """The read of the index may wait (behind a compaction, ~30-60 ms more at 100k chunks):
    the save is drafted by its words first, then narrowed to what changed."""
    found_meanwhile = []
    read = Workspace._stored_chunks

    def read_slowly(self, paths):
        found_meanwhile.append(_paths(self, "rebalance_ledger_quota", mode="lexical")[:1])
        return read(self, paths)

    monkeypatch.setattr(Workspace, "_stored_chunks", read_slowly)
    _save_renamed(workspace.root)
    assert workspace.draft_saved([LRU]) == [LRU]
    assert found_meanwhile == [[LRU]]
    assert workspace._draft.kept_chunks(LRU) == 1  # noqa: SLF001 (the import line's chunk)


def test_a_save_whose_stored_chunks_cannot_be_read_is_drafted_by_its_words(
        workspace: Workspace, monkeypatch):
    """The read of the saved files' stored chunks fails: they are drafted whole, as before
    the stored chunks were kept, and the next search reports nothing of it."""
    def unreadable(store, paths, columns):
        raise IndexCorruptError("chunks.lance: a data file is missing")

    monkeypatch.setattr(ChunkStore, "chunks_of", unreadable)
    _save_renamed(workspace.root)
    assert workspace.draft_saved([LRU]) == [LRU]
    assert workspace._draft.kept_chunks(LRU) == 0  # noqa: SLF001
    found = workspace.search("rebalance_ledger_quota", mode="lexical").results
    assert found[0].path == LRU and found[0].kind == "text"
    assert {hit.kind for hit in workspace.search("RecencyCache", mode="lexical").results
            if hit.path == LRU} == {"text"}


def test_a_deleted_file_is_found_no_more_before_its_update(workspace: Workspace):
    assert PASSWORDS in _paths(workspace, "hash_password", mode="lexical")
    (workspace.root / PASSWORDS).unlink()
    assert workspace.draft_saved([str(workspace.root / PASSWORDS)]) == [PASSWORDS]  # absolute
    assert PASSWORDS not in _paths(workspace, "hash_password", mode="lexical")
    assert PASSWORDS not in _paths(workspace, "hash a password with a salt")
    assert PASSWORDS not in _paths(workspace, "hash a password with a salt", mode="vector")
    workspace.update([PASSWORDS])
    assert _held(workspace) == 0
    assert PASSWORDS not in _paths(workspace, "hash_password", mode="lexical")


def test_a_deleted_folder_is_found_no_more_before_its_update(workspace: Workspace):
    shutil.rmtree(workspace.root / "src/auth")
    assert workspace.draft_saved(["src/auth"]) == ["src/auth"]  # (no event names its files)
    assert PASSWORDS not in _paths(workspace, "hash_password", mode="lexical")
    assert PASSWORDS not in _paths(workspace, "hash a password with a salt")
    assert PASSWORDS not in _paths(workspace, "hash a password with a salt", mode="vector")
    assert LRU in _paths(workspace, "LRUCache", mode="lexical")  # (only what was under it)
    workspace.update(["src/auth"])
    assert _held(workspace) == 0
    assert PASSWORDS not in _paths(workspace, "hash_password", mode="lexical")


def test_drafts_go_when_their_update_fails(workspace: Workspace, monkeypatch):
    _save_renamed(workspace.root)
    workspace.draft_saved([LRU])

    def fails(self, paths):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Indexer, "update_paths", fails)
    with pytest.raises(RuntimeError):
        workspace.update([LRU])
    assert _held(workspace) == 0  # the index is the truth again: the old text
    assert "LRUCache" in _symbols(workspace, "LRUCache")


def test_a_file_saved_again_during_its_update_keeps_its_newer_draft(workspace: Workspace,
                                                                    monkeypatch):
    """The update read the first save; the second, drafted while it wrote, stays drafted
    until the next update reads it."""
    _save_renamed(workspace.root)
    workspace.draft_saved([LRU])
    replace = ChunkStore.replace_files

    def saved_again_meanwhile(store, *args, **kwargs):
        path = workspace.root / LRU
        path.write_text(path.read_text().replace("rebalance_ledger_quota", "settle_vendor_dues"))
        workspace.draft_saved([LRU])
        return replace(store, *args, **kwargs)

    monkeypatch.setattr(ChunkStore, "replace_files", saved_again_meanwhile)
    workspace.update([LRU])
    monkeypatch.undo()
    assert _held(workspace) == 1 and workspace.drafted_files() == 0  # (no new file)
    assert _paths(workspace, "settle_vendor_dues", mode="lexical")[:1] == [LRU]
    assert "rebalance_ledger_quota" not in _symbols(workspace, "rebalance_ledger_quota")
    workspace.update([LRU])
    assert _held(workspace) == 0
    found = workspace.search("settle_vendor_dues", mode="lexical").results
    assert found[0].path == LRU and found[0].symbol == "settle_vendor_dues"


def test_a_file_saved_again_during_its_update_keeps_what_it_still_holds(workspace: Workspace,
                                                                        monkeypatch):
    """The second save is drafted with the chunks stored before the update; the update then
    writes the file's unchanged class at its new line, with a new id. The draft still knows it,
    by its content: it is found, where it is."""
    path = workspace.root / LRU
    original = path.read_text()
    path.write_text("# Caches.\n" + original)  # the class one line down
    workspace.draft_saved([LRU])
    replace = ChunkStore.replace_files

    def saved_again_meanwhile(store, *args, **kwargs):
        path.write_text("# Caches.\n" + original
                        + "\n\ndef rebalance_ledger_quota(ledger):\n    return ledger\n")
        workspace.draft_saved([LRU])
        return replace(store, *args, **kwargs)

    monkeypatch.setattr(ChunkStore, "replace_files", saved_again_meanwhile)
    workspace.update([LRU])
    monkeypatch.undo()
    assert _held(workspace) == 1
    line = path.read_text().split("\n").index("class LRUCache:") + 1
    for query, mode in (("LRUCache", "lexical"),
                        ("cache that evicts the least recently used entry", "hybrid")):
        found = workspace.search(query, mode=mode).results[0]
        assert (found.path, found.symbol, found.start_line) == (LRU, "LRUCache", line), mode
    assert _paths(workspace, "rebalance_ledger_quota", mode="lexical")[:1] == [LRU]


def test_chunks_placed_by_their_content_are_shown_once_a_place():
    """An update may have written more copies of a text than the file now holds (a save
    during the update of an earlier one): one of them is shown at the place, not all."""
    def row(path: str, start: int) -> dict:
        return {"id": f"{path}#L{start}-aaaa", "path": path, "start_line": start,
                "end_line": start + 1, "kind": "function", "symbol": "f",
                "text": "def f():\n    pass"}

    draft = DraftIndex()
    draft.add("a.py", "def f():\n    pass\n", "python", saved=True, stored=[row("a.py", 1)])
    view = draft.view()
    written = [view.moved_row(row("a.py", start)) for start in (3, 6)]  # ids of their own
    assert [(r["start_line"], r["end_line"]) for r in written] == [(1, 2), (1, 2)]
    undrafted = [row("b.py", 1), row("b.py", 1)]  # (not drafted: left as they are)
    kept = pipeline._one_per_place(  # noqa: SLF001
        [Candidate(r) for r in written + undrafted], view.moved)
    assert [(c.row["path"], c.row["start_line"]) for c in kept] == [("a.py", 1), ("b.py", 1),
                                                                    ("b.py", 1)]


def test_a_run_ends_the_drafts_from_before_it(workspace: Workspace):
    _save_renamed(workspace.root)
    (workspace.root / PASSWORDS).unlink()
    assert workspace.draft_saved([LRU, PASSWORDS]) == [PASSWORDS, LRU]
    workspace.index()
    assert _held(workspace) == 0
    assert workspace.search("rebalance_ledger_quota", mode="lexical").results[0].symbol
    assert PASSWORDS not in _paths(workspace, "hash_password", mode="lexical")


def test_a_run_that_stops_keeps_the_drafts_its_updates_will_end(workspace: Workspace,
                                                                  monkeypatch):
    _save_renamed(workspace.root)
    workspace.draft_saved([LRU])

    def stop() -> None:  # before the run reads the changed file
        raise KeyboardInterrupt

    monkeypatch.setattr(workspace.priority, "wait_turn", stop)
    with pytest.raises(KeyboardInterrupt):
        workspace.index()
    monkeypatch.undo()
    assert _held(workspace) == 1  # its new text is still what words find
    assert "rebalance_ledger_quota" not in _symbols(workspace, "rebalance_ledger_quota")
    assert _paths(workspace, "rebalance_ledger_quota", mode="lexical")[:1] == [LRU]
    workspace.update([LRU])
    assert _held(workspace) == 0


def test_of_a_burst_too_large_to_read_what_is_gone_is_drafted(workspace: Workspace):
    """A branch switch: too many files to read ahead of their update, but the deleted ones
    (a stat each) are found no more from the start."""
    gone = ((PASSWORDS, "hash a password with a salt"),
            ("docs/guide.md", "nginx reverse proxy deployment"))
    for path, query in gone:
        for mode in ("lexical", "hybrid", "vector"):
            assert path in _paths(workspace, query, mode=mode), (path, mode)
    many = [f"src/gen_{n}.py" for n in range(DRAFT_SAVED_MAX_FILES)]
    for rel in many:
        (workspace.root / rel).write_text(f"def generated_{rel[8:-3]}():\n    pass\n")
    _save_renamed(workspace.root)
    (workspace.root / "docs/guide.md").unlink()
    shutil.rmtree(workspace.root / "src/auth")
    burst = [*many, LRU, "docs/guide.md", "src/auth"]
    assert workspace.draft_saved(burst) == ["docs/guide.md", "src/auth"]  # the deleted two
    assert _held(workspace) == 2
    for path, query in gone:
        for mode in ("lexical", "hybrid", "vector"):
            assert path not in _paths(workspace, query, mode=mode), (path, mode)
    # What was written is not read ahead: words find what the index holds until the update.
    assert "LRUCache" in _symbols(workspace, "LRUCache")
    assert _paths(workspace, "generated_7", mode="lexical") == []
    workspace.update(burst)
    assert _held(workspace) == 0
    assert _paths(workspace, "generated_7", mode="lexical")[:1] == ["src/gen_7.py"]
    assert "RecencyCache" in _symbols(workspace, "RecencyCache")
    assert PASSWORDS not in _paths(workspace, "hash_password", mode="lexical")


def test_a_burst_too_large_to_read_waits_for_searches_only_before_what_it_drafts(
        sample_root: Path):
    """Searches go first before each file drafted, not before each of a branch switch's
    paths that exist and are not read."""
    many = [f"src/gen_{n}.py" for n in range(DRAFT_SAVED_MAX_FILES)]
    for rel in many:
        (sample_root / rel).write_text("x = 1\n")
    (sample_root / PASSWORDS).unlink()
    pauses = []
    drafted = draft_saved(DraftIndex(), WorkspaceFilter(sample_root, Settings()),
                          [*many, LRU, PASSWORDS], lambda: pauses.append(1))
    assert drafted == [PASSWORDS] and len(pauses) == 1
    assert len(draft_saved(DraftIndex(), WorkspaceFilter(sample_root, Settings()), many[:3],
                           lambda: pauses.append(1))) == 3
    assert len(pauses) == 4  # a burst it reads: before each file


def test_without_lexical_first_nothing_is_drafted(tmp_path: Path, embedder):
    ws = Workspace.open(make_sample_root(tmp_path), Settings.from_dict({"lexicalFirst": False}),
                        embedder=embedder)
    ws.index()
    _save_renamed(ws.root)
    assert not ws.drafts_saved_files()
    assert ws.draft_saved([LRU]) == []
    assert "LRUCache" in _symbols(ws, "LRUCache")  # the index as it is


# ---- through the server, its writer held inside a write -------------------------------------


async def _search(lsp: InProcessServer, query: str) -> list[dict]:
    return (await lsp.result("rag/search", {"query": query, "mode": "lexical"}))["results"]


async def _until_found(lsp: InProcessServer, query: str, wanted, timeout: float = 10.0) -> list:
    deadline = time.monotonic() + timeout
    while not wanted(results := await _search(lsp, query)):
        assert time.monotonic() < deadline, f"{query!r}: {results}"
        await asyncio.sleep(0.02)
    return results


async def test_a_save_behind_a_busy_writer_is_found_before_its_update(sample_root, embedder):
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(sample_root, options={})
        await lsp.wait_for_state("ready", timeout=WAIT_SECONDS)
        (folder,) = lsp.server.folders.values()
        release = threading.Event()
        held = asyncio.ensure_future(folder.jobs.write(release.wait, WAIT_SECONDS))
        try:
            _save_renamed(sample_root)
            (sample_root / PASSWORDS).unlink()
            lsp.notify("workspace/didChangeWatchedFiles", {"changes": [
                {"uri": (sample_root / LRU).as_uri(), "type": 2},  # Changed
                {"uri": (sample_root / PASSWORDS).as_uri(), "type": 3}]})  # Deleted
            found = await _until_found(lsp, "rebalance_ledger_quota",
                                       lambda rs: rs and rs[0]["path"] == LRU)
            assert not held.done()  # the writer is still held: the update has not run
            assert found[0]["symbol"] == ""  # a drafted window
            assert await _search(lsp, "hash_password") == []
        finally:
            release.set()
            await held
        found = await _until_found(lsp, "rebalance_ledger_quota",
                                   lambda rs: rs and rs[0]["symbol"], timeout=WAIT_SECONDS)
        assert found[0]["path"] == LRU
        await _until_none_held(folder.workspace)  # (the deletion's entry goes as update ends)
        assert await _search(lsp, "hash_password") == []


async def test_a_branch_switch_behind_a_busy_writer_hides_its_deleted_files(sample_root,
                                                                          embedder):
    """Too many changed files to read ahead of their update: the deleted one is found no more
    while the update waits; the new ones are found once it has run."""
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(sample_root, options={})
        await lsp.wait_for_state("ready", timeout=WAIT_SECONDS)
        (folder,) = lsp.server.folders.values()
        assert await _search(lsp, "hash_password")
        release = threading.Event()
        held = asyncio.ensure_future(folder.jobs.write(release.wait, WAIT_SECONDS))
        try:
            changes = []
            for n in range(DRAFT_SAVED_MAX_FILES):
                path = sample_root / f"src/gen_{n}.py"
                path.write_text(f"def generated_{n}():\n    pass\n")
                changes.append({"uri": path.as_uri(), "type": 1})  # Created
            (sample_root / PASSWORDS).unlink()
            changes.append({"uri": (sample_root / PASSWORDS).as_uri(), "type": 3})  # Deleted
            lsp.notify("workspace/didChangeWatchedFiles", {"changes": changes})
            await _until_found(lsp, "hash_password", lambda rs: rs == [])
            assert not held.done()  # the writer is still held: the update has not run
            assert await _search(lsp, "generated_7") == []  # not read ahead
        finally:
            release.set()
            await held
        # The update drafts its files one by one before it embeds them: until gen_7's turn,
        # "generated" alone finds the others (a CI run met gen_0), so wait for gen_7 on top.
        await _until_found(lsp, "generated_7", lambda rs: rs and rs[0]["path"] == "src/gen_7.py",
                           timeout=WAIT_SECONDS)
        await _until_none_held(folder.workspace)
        assert await _search(lsp, "hash_password") == []


async def test_a_file_drafted_while_an_update_reads_it_is_read_again(sample_root, embedder,
                                                                    monkeypatch):
    """A file saved while an earlier save is drafted goes into that save's update, and may be
    drafted only after the update has read it: the server updates it once more, so no draft
    outlives what the index has."""
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(sample_root, options={})
        await lsp.wait_for_state("ready", timeout=WAIT_SECONDS)
        (folder,) = lsp.server.folders.values()
        ws = folder.workspace
        first_drafting, first_release = threading.Event(), threading.Event()
        update_reads, second_drafted = threading.Event(), threading.Event()
        draft_saved, replace_files = ws.draft_saved, ChunkStore.replace_files

        def drafting(paths):
            if PASSWORDS in paths:  # the first save: its flush drafts it, held
                first_drafting.set()
                assert first_release.wait(WAIT_SECONDS)
            if LRU in paths:  # the second: drafted once the update has read it
                assert update_reads.wait(WAIT_SECONDS)
                drafted = draft_saved(paths)
                second_drafted.set()
                return drafted
            return draft_saved(paths)

        def writing(store, *args, **kwargs):
            update_reads.set()
            assert second_drafted.wait(WAIT_SECONDS)
            return replace_files(store, *args, **kwargs)

        monkeypatch.setattr(ws, "draft_saved", drafting)
        monkeypatch.setattr(ChunkStore, "replace_files", writing)
        passwords = sample_root / PASSWORDS
        passwords.write_text(passwords.read_text() + "\n\ndef rotate_pepper():\n    pass\n")
        lsp.notify("workspace/didChangeWatchedFiles",
                   {"changes": [{"uri": passwords.as_uri(), "type": 2}]})
        await asyncio.get_running_loop().run_in_executor(None, first_drafting.wait, 10)
        _save_renamed(sample_root)
        lsp.notify("workspace/didChangeWatchedFiles",
                   {"changes": [{"uri": (sample_root / LRU).as_uri(), "type": 2}]})
        deadline = time.monotonic() + 10
        # Its event has arrived, and its flush has taken it and waits for the reader thread.
        while LRU not in folder.jobs.pending or folder.jobs.undrafted:
            assert time.monotonic() < deadline, "the second save's flush never started"
            await asyncio.sleep(0.01)
        first_release.set()
        found = await _until_found(lsp, "rebalance_ledger_quota",
                                   lambda rs: rs and rs[0]["symbol"], timeout=WAIT_SECONDS)
        assert found[0]["path"] == LRU
        await _until_none_held(ws)


def test_the_agents_keeper_drafts_a_change_before_its_update(sample_root, tmp_path,
                                                             monkeypatch):
    """The MCP server's keeper: a change its watcher reports is found by its words while the
    keeper's one thread is still busy (held here inside the update)."""
    keeper = WorkspaceKeeper(sample_root, Settings.from_dict({"indexPath": str(tmp_path / "ix")}),
                             watch=False)
    keeper.start()
    updating, release = threading.Event(), threading.Event()
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while keeper.status().phase != READY:
            assert time.monotonic() < deadline, f"not ready: {keeper.status()}"
            time.sleep(0.05)
        ws = keeper.workspace()
        update = ws.update

        def held(paths):
            updating.set()
            assert release.wait(WAIT_SECONDS)
            return update(paths)

        monkeypatch.setattr(ws, "update", held)
        _save_renamed(sample_root)
        keeper._on_paths([str(sample_root / LRU)])  # noqa: SLF001 (as its watcher calls it)
        assert updating.wait(WAIT_SECONDS)
        found = ws.search("rebalance_ledger_quota", mode="lexical").results
        assert found and found[0].path == LRU and found[0].symbol == ""  # drafted
        release.set()
        deadline = time.monotonic() + WAIT_SECONDS
        while _held(ws):
            assert time.monotonic() < deadline, "the draft outlived the update"
            time.sleep(0.05)
        assert ws.search("rebalance_ledger_quota", mode="lexical").results[0].symbol
    finally:
        release.set()
        keeper.close()


def test_a_deleted_folder_that_filled_the_candidates_leaves_the_rest_found(tmp_path, embedder,
                                                                           monkeypatch):
    """A deleted file's stored chunks are set aside after LanceDB returns them, until its
    update: when they were most of a search's candidates, the search asks for more, so the
    files still there are found as they would be without them."""
    root = make_sample_root(tmp_path)
    write_files(root, {f"legacy/rotate_{n}.py": f'def rotate_signing_key_{n}(vault):\n'
                                                f'    """Rotate the signing key in the vault, '
                                                f'variant {n}."""\n    return vault.rotate()\n'
                       for n in range(12)})
    write_files(root, {"src/keys.py": 'def renew_signing_key(vault):\n'
                                      '    """Renew the signing key kept in the vault."""\n'
                                      '    return vault.renew()\n',
                       "src/tokens.py": 'def refresh_token(store):\n'
                                        '    """Refresh an expired access token."""\n'
                                        '    return store.refresh()\n'})
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    monkeypatch.setattr(pipeline, "MIN_CANDIDATES", 4)  # fewer than the legacy chunks
    monkeypatch.setattr(pipeline, "CANDIDATES_PER_RESULT", 1)
    query = "rotate the signing key in the vault"
    for mode in ("vector", "lexical", "hybrid"):
        found = _paths(ws, query, mode=mode, top_k=4)
        assert found and all(path.startswith("legacy/") for path in found), (mode, found)
    shutil.rmtree(root / "legacy")
    assert ws.draft_saved(["legacy"]) == ["legacy"]
    python = SearchFilters(languages=["python"])  # a filter: LanceDB's queries, not memory's
    for mode in ("vector", "lexical", "hybrid"):
        for filters in (None, python):
            found = _paths(ws, query, mode=mode, top_k=4, filters=filters)
            assert found and found[0] == "src/keys.py", (mode, filters, found)
            assert not any(path.startswith("legacy/") for path in found), (mode, found)


def test_a_retriever_asks_again_only_while_deleted_files_took_many_places():
    stored = [{"id": str(n), "path": f"{'old' if n % 3 else 'src'}/{n}.py"} for n in range(100)]
    asked: list[int] = []

    def fetch(n: int) -> list[dict]:
        asked.append(n)
        return stored[:n]

    def deleted(path: str) -> bool:
        return path.startswith("old/")

    def visible_rows(limit, gone=deleted, saved=lambda _path: False):
        asked.clear()
        return pipeline._visible_rows(  # noqa: SLF001
            fetch, limit, lambda row: None if gone(row["path"]) or saved(row["path"]) else row,
            gone)

    rows = visible_rows(8)
    assert [row["id"] for row in rows] == ["0", "3", "6", "9", "12", "15"]  # three quarters
    assert asked == [8, 18]  # twice as many more as were lost
    assert len(visible_rows(8, gone=lambda path: path == "old/1.py")) == 7
    assert asked == [8]  # one place of eight lost: not worth a second query
    assert len(visible_rows(8, gone=lambda path: path in {"old/1.py", "old/2.py"})) == 6
    assert asked == [8]  # two of eight: still three quarters left
    # A saved file's chunks are set aside too, but its drafted windows take their places.
    assert len(visible_rows(8, gone=lambda _path: False, saved=deleted)) == 3 and asked == [8]
    assert visible_rows(8, gone=lambda _path: True) == []
    assert max(asked) == 8 * pipeline.HIDDEN_REFETCH_MAX  # bounded
    asked.clear()
    few = pipeline._visible_rows(  # noqa: SLF001
        lambda n: fetch(n)[:7], 8, lambda row: None if deleted(row["path"]) else row, deleted)
    assert [row["id"] for row in few] == ["0", "3", "6"] and asked == [8]  # all there is
