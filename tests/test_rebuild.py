"""A full rebuild is made beside the live index and swapped in when complete: searches keep
answering from the old index until then, in this process and in others, and an interrupted
rebuild leaves the old index as it was. Real model, real LanceDB, the small sample folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rag_lsp.indexing.progress import IndexProgress
from rag_lsp.store import staging
from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.store.manifest import IndexManifest
from rag_lsp.workspace import REBUILD_NOTE, Workspace

ZOO = ('def count_zebra_stripes(zebra):\n    """How many stripes a zebra has."""\n'
       "    return len(zebra.stripes)\n")


class Stop(Exception):
    """Stands for a cancel (the server's progress callback raises) or a crash."""


def _paths(ws: Workspace, query: str, mode: str | None = None) -> list[str]:
    return [hit.path for hit in ws.search(query, mode=mode).results]


def _change_the_folder(root: Path) -> None:
    """After the first index: a new file only the rebuild will know, a file only the old
    index knows."""
    (root / "src" / "zoo.py").write_text(ZOO, encoding="utf-8")
    (root / "src" / "cache" / "lru.py").unlink()


def _old_answers(ws: Workspace) -> None:
    assert _paths(ws, "follow redirects")[:1] == ["src/http/client.py"]
    assert "src/cache/lru.py" in _paths(ws, "LRUCache", mode="lexical")
    assert "src/zoo.py" not in _paths(ws, "count_zebra_stripes", mode="lexical")


def _new_answers(ws: Workspace) -> None:
    assert _paths(ws, "follow redirects")[:1] == ["src/http/client.py"]
    assert "src/cache/lru.py" not in _paths(ws, "LRUCache", mode="lexical")
    assert _paths(ws, "count_zebra_stripes", mode="lexical")[:1] == ["src/zoo.py"]


def test_searches_use_the_old_index_until_the_rebuild_is_swapped_in(workspace, sample_root):
    note = workspace.knowledge.add("debugger", "Redirect loops end in TooManyRedirects")
    _change_the_folder(sample_root)
    old_build = IndexManifest.read(workspace.index_dir).created_at
    seen: list[IndexProgress] = []

    def mid_run(event: IndexProgress) -> None:
        if event.phase == "index" and not seen:
            seen.append(event)
            _old_answers(workspace)  # was: nothing (the tables had just been dropped)
            assert workspace.status().files == 5

    report = workspace.index(full=True, progress=mid_run)
    assert seen and REBUILD_NOTE in seen[0].describe()
    assert report.files_indexed == 5 and report.chunks_embedded > 0
    _new_answers(workspace)
    assert IndexManifest.read(workspace.index_dir).created_at != old_build
    assert not staging.staging_dir(workspace.index_dir).exists()
    assert [e.id for e in workspace.knowledge.list("debugger")[0]] == [note.id]
    # Another reader of the same folder, opened before the rebuild, follows it too.
    assert workspace.status().files == 5


@pytest.mark.parametrize("crash", [False, True], ids=["cancelled", "crashed"])
def test_an_interrupted_rebuild_leaves_the_old_index(workspace, sample_root, monkeypatch,
                                                     crash):
    _change_the_folder(sample_root)

    def stop_mid_run(event: IndexProgress) -> None:
        if event.phase == "index":
            raise Stop

    if crash:  # the process dies: nothing cleans up after it
        monkeypatch.setattr("rag_lsp.workspace.discard", lambda index_dir: None)
    with pytest.raises(Stop):
        workspace.index(full=True, progress=stop_mid_run)
    assert staging.staging_dir(workspace.index_dir).exists() == crash
    _old_answers(workspace)
    monkeypatch.undo()

    reopened = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    _old_answers(reopened)
    report = reopened.index()  # the next run: leftovers removed, then the usual update
    assert not staging.staging_dir(workspace.index_dir).exists()
    assert report.files_indexed == 1 and report.files_removed == 1
    _new_answers(reopened)


def test_a_swap_cut_short_is_finished_by_the_next_writer(workspace, sample_root, monkeypatch):
    _change_the_folder(sample_root)
    real_replace = os.replace
    staged_manifest = staging.staging_dir(workspace.index_dir) / "manifest.json"

    def fail_on_the_manifest(src, dst):
        if Path(src) == staged_manifest and Path(dst).parent == workspace.index_dir:
            raise Stop  # the tables have moved, the manifest has not
        real_replace(src, dst)

    monkeypatch.setattr(staging.os, "replace", fail_on_the_manifest)
    with pytest.raises(Stop):
        workspace.index(full=True)
    monkeypatch.undo()
    assert staging.swap_under_way(workspace.index_dir)

    reopened = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    reopened.update([])  # any write settles what the rebuild left
    assert not staging.staging_dir(workspace.index_dir).exists()
    _new_answers(reopened)
    _new_answers(workspace)


def test_a_damaged_index_is_still_dropped_and_rebuilt_in_place(workspace):
    for data_file in (workspace.index_dir / "chunks.lance" / "data").iterdir():
        data_file.unlink()
    seen: list[str] = []
    report = workspace.index(full=True, progress=lambda e: seen.append(e.describe()))
    assert report.files_indexed == 5
    assert not any(REBUILD_NOTE in line for line in seen)  # nothing usable to search meanwhile
    assert _paths(workspace, "follow redirects")[:1] == ["src/http/client.py"]


def test_a_read_a_swap_lands_in_is_not_paired_with_the_old_tables_vectors(workspace,
                                                                          sample_root,
                                                                          monkeypatch):
    """A reader holds the old tables' vectors in memory; a rebuild is swapped in between its
    "moved?" check and its read. Both builds are at the same table version, so the old
    vectors look current: the new tables' rows must not be matched by row id with them (a
    search in another process answered app.js for "follow redirects")."""
    dim = workspace.embedder.dimension
    reader = ChunkStore(workspace.index_dir, dim)
    deadline = time.monotonic() + 60
    while reader.vectors_in_memory() is None:  # loaded in the background
        assert time.monotonic() < deadline, "the vectors never loaded into memory"
        time.sleep(0.02)
    version = reader.version()
    _change_the_folder(sample_root)
    workspace.index(full=True)
    assert reader.moved() and reader.version() == version  # what makes the old vectors look current
    fresh = ChunkStore(workspace.index_dir, dim)  # opened on the new build
    query = workspace.embedder.embed_query("follow redirects")
    nearest = [row["id"] for row in fresh.vector_search(query, 3)]
    lexical = {row["id"]: row["vector"] for row in fresh.text_search("count_zebra_stripes", 5)}
    assert nearest[0].startswith("src/http/client.py") and lexical

    checks: list[bool] = []
    really_moved = ChunkStore.moved

    def swapped_right_after_the_first_check(store: ChunkStore) -> bool:
        checks.append(True)
        return len(checks) > 1 and really_moved(store)

    monkeypatch.setattr(ChunkStore, "moved", swapped_right_after_the_first_check)
    # The rows from memory, as a search's own (its words given), then checked again.
    words = ("follow", "redirect")
    assert [row["id"] for row in reader.vector_search(query, 3, terms=words)] == nearest
    checks.clear()
    rows = reader.text_search("count_zebra_stripes", 5, terms=words)
    assert [row["id"] for row in rows] == list(lexical)
    assert all(np.allclose(row["vector"], lexical[row["id"]]) for row in rows)


READER = """
import json, sys, time
from pathlib import Path
from rag_lsp.config import Settings
from rag_lsp.workspace import Workspace

ws = Workspace.open(sys.argv[1], Settings.from_dict({}))
stop = Path(sys.argv[2])
while not stop.exists():
    line = {}
    try:
        line["zoo"] = [h.path for h in ws.search("count_zebra_stripes", mode="lexical").results]
        line["client"] = [h.path for h in ws.search("follow redirects").results][:1]
    except Exception as exc:
        line["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(line), flush=True)
"""


def test_a_reader_in_another_process_follows_the_swap(workspace, sample_root, tmp_path):
    _change_the_folder(sample_root)
    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(sample_root), str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[dict] = []
    threading.Thread(target=lambda: lines.extend(map(json.loads, reader.stdout)),
                     daemon=True).start()

    def wait_for(count: int, what: str) -> None:
        deadline = time.monotonic() + 120
        while len(lines) < count:
            assert reader.poll() is None and time.monotonic() < deadline, (
                what, reader.poll(), reader.stderr.read() if reader.poll() is not None else "")
            time.sleep(0.02)

    try:
        wait_for(1, "the reader's first search")
        mid: list[int] = []

        def mid_run(event: IndexProgress) -> None:
            if event.phase == "index" and not mid:
                mid.append(len(lines))
                wait_for(len(lines) + 2, "searches during the rebuild")

        workspace.index(full=True, progress=mid_run)
        swapped = len(lines)
        wait_for(swapped + 2, "searches after the rebuild")
    finally:
        stop.touch()
        reader.wait(timeout=60)
    assert [line for line in lines if "error" in line] == []
    assert all(line["client"] == ["src/http/client.py"] for line in lines)
    found = [line["zoo"] == ["src/zoo.py"] for line in lines]
    assert not any(found[: mid[0] + 2])  # the old index until the swap…
    assert all(found[swapped + 1:])  # …the new one after it (a search may straddle it)
    assert found == sorted(found)  # and never back


def test_a_search_that_meets_the_tables_mid_swap_waits_for_the_new_build(workspace,
                                                                        sample_root,
                                                                        monkeypatch):
    """Another reader's search lands between the swap's renames: the chunks folder has gone
    aside, the new one is not in place yet. It waits for the swap and answers from the new
    build (in another process it once failed with LanceDB's "Table 'chunks' was not found")."""
    reader = Workspace.open(workspace.root, workspace.settings, embedder=workspace.embedder)
    _old_answers(reader)  # its tables are open on the old build
    old_store = reader._index.store()
    # Its checks of the folder and of the version it reads ran just before the folder went
    # aside; it reads the table (no copy in memory yet, as just after a start).
    version = old_store.version()
    monkeypatch.setattr(old_store, "moved", lambda: False)
    monkeypatch.setattr(old_store, "_visible_version", lambda: version)
    monkeypatch.setattr(old_store, "vectors_in_memory", lambda: None)
    _change_the_folder(sample_root)
    live_chunks = workspace.index_dir / "chunks.lance"
    real_replace = os.replace
    searches: list[threading.Thread] = []
    answers: list[object] = []

    def search() -> None:
        try:
            answers.append(_paths(reader, "count_zebra_stripes", mode="lexical"))
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            answers.append(exc)

    def search_mid_swap(src, dst):
        real_replace(src, dst)
        if Path(src) == live_chunks and not searches:  # the old folder just went aside
            searches.append(threading.Thread(target=search))
            searches[0].start()
            searches[0].join(timeout=0.5)  # long enough to meet the gap
            assert not answers, f"the search did not wait for the swap: {answers}"

    monkeypatch.setattr(staging.os, "replace", search_mid_swap)
    workspace.index(full=True)
    assert searches, "the swap never moved the chunks folder"
    searches[0].join(timeout=30)
    assert answers and not isinstance(answers[0], Exception), answers
    assert answers[0][:1] == ["src/zoo.py"]
    _new_answers(reader)
