"""Garbage inside an index file that LanceDB reads as data: found, reported, rebuilt.

Garbage over the start or end of a data file makes LanceDB fail; the same bytes in the middle
can land in vectors or text, which it reads back as values, and searches answered wrong with
no error. Each file's digest is recorded when it is written (rag_lsp/store/integrity.py).
Real model, real LanceDB on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from rag_lsp.errors import IndexCorruptError
from rag_lsp.store import lance_store
from rag_lsp.store.integrity import INTEGRITY_NAME, table_files
from rag_lsp.workspace import Workspace

from .raw_lsp import RawServer
from .test_cli import rag
from .test_patched_matrix import record, rows_for

# Not random: the same bytes every run, not a valid UTF-8 run nor a plausible float.
GARBAGE = bytes((n * 37 + 11) % 256 for n in range(64))
QUERIES = ["follow redirects", "hash a password with a salt", "evict the oldest cache entry",
           "deployment behind nginx", "debounce a function"]


def _answers(ws: Workspace) -> list[list[tuple]]:
    return [[(h.path, h.start_line, h.end_line, round(h.score, 4))
             for h in ws.search(q, threshold=0.0).results] for q in QUERIES]


def _chunk_data_file(ws: Workspace) -> Path:
    files = sorted((ws.index_dir / "chunks.lance" / "data").iterdir(),
                   key=lambda p: p.stat().st_size)
    return files[-1]


def _garbage_in_the_middle(path: Path, *, keep_mtime: bool = False) -> None:
    info = path.stat()
    with open(path, "r+b") as data:
        data.seek(info.st_size // 2)
        data.write(GARBAGE)
    if keep_mtime:  # as bit rot would: nothing but the bytes changed
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size


def _reopened(ws: Workspace) -> Workspace:
    return Workspace.open(ws.root, ws.settings, embedder=ws.embedder)


def _recorded(ws: Workspace) -> dict:
    return json.loads((ws.index_dir / INTEGRITY_NAME).read_text(encoding="utf-8"))["files"]


def _covered(ws: Workspace) -> set[str]:
    return set(table_files(ws.index_dir, ("chunks.lance", "files.lance")))


def test_garbage_in_the_middle_of_a_data_file_is_damage_then_rebuilt(workspace):
    before = _answers(workspace)
    damaged = _chunk_data_file(workspace)
    _garbage_in_the_middle(damaged)
    reopened = _reopened(workspace)
    with pytest.raises(IndexCorruptError) as error:
        reopened.search("follow redirects")
    message = str(error.value)
    assert f"chunks.lance/data/{damaged.name}" in message and "changed after it was written" \
        in message and "rag-lsp index --full" in message
    report = reopened.index()  # no --full needed: rebuilt by itself, and says why
    assert report.files_indexed == 5 and damaged.name in report.rebuilt_because
    assert _answers(reopened) == before


def test_bit_rot_that_keeps_size_and_mtime_is_found_by_the_next_index_run(workspace):
    before = _answers(workspace)
    _garbage_in_the_middle(_chunk_data_file(workspace), keep_mtime=True)
    reopened = _reopened(workspace)
    report = reopened.index()  # every run reads every recorded file first
    assert report.files_indexed == 5 and "changed after it was written" in report.rebuilt_because
    assert _answers(reopened) == before


def test_a_full_rebuild_of_a_damaged_index_is_made_in_place(workspace):
    """Not beside it: searches must not go on answering from the damaged one meanwhile."""
    _garbage_in_the_middle(_chunk_data_file(workspace), keep_mtime=True)
    assert not workspace._index.answers_searches()
    seen: list[str] = []
    workspace.index(full=True, progress=lambda e: seen.append(e.describe()))
    assert not any("searches use the current index" in line for line in seen)
    assert workspace.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"


def test_updates_compaction_and_cleanup_keep_the_check_passing(workspace, sample_root,
                                                               monkeypatch):
    """No false alarm: every commit's new files are recorded, files a cleanup removed are
    forgotten, and nothing recorded is ever rewritten."""
    # Compaction's cleanup removes the old files at once, not a minute later.
    monkeypatch.setattr(lance_store, "_KEEP_OLD_VERSIONS", timedelta(milliseconds=1))
    sidecar = workspace.index_dir / INTEGRITY_NAME
    assert sidecar.stat().st_mode & 0o777 == 0o600
    assert set(_recorded(workspace)) == _covered(workspace)
    first = dict(_recorded(workspace))
    lru = sample_root / "src/cache/lru.py"
    steps = [
        lambda: lru.write_text(lru.read_text() + "\n\ndef size(cache):\n    return 1\n"),
        lambda: (sample_root / "notes.md").write_text("# Notes\n\nKeep the cache small.\n"),
        lambda: (sample_root / "web/static/app.js").unlink(),
        lambda: (sample_root / "src/auth/passwords.py").rename(sample_root / "src/auth/pw.py"),
    ]
    for step in steps:
        step()
        workspace.update(["src/cache/lru.py", "notes.md", "web/static/app.js",
                          "src/auth/passwords.py", "src/auth/pw.py"])
        workspace._open_store().verify(full=True)
    workspace.compact()  # compaction and cleanup: files go, others come
    assert not set(first) <= _covered(workspace), "the cleanup removed nothing"
    assert set(_recorded(workspace)) == _covered(workspace)
    for name, entry in _recorded(workspace).items():  # what stayed was never rewritten
        assert first.get(name, entry) == entry
    reopened = _reopened(workspace)
    assert reopened.index().rebuilt_because == ""
    reopened.index(full=True)  # a rebuild beside the index brings its own digests along
    assert set(_recorded(reopened)) == _covered(reopened)
    assert _reopened(workspace).index().rebuilt_because == ""


def test_an_index_without_digests_is_trusted_on_first_sight(workspace):
    """An index written before digests were recorded: nothing to compare, so the next run
    records what it finds (and no alarm)."""
    (workspace.index_dir / INTEGRITY_NAME).unlink()
    reopened = _reopened(workspace)
    assert reopened.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"
    assert reopened.index().rebuilt_because == ""
    assert set(_recorded(reopened)) == _covered(reopened)


def _cut_short(recorded: dict) -> str:  # a crash mid-write
    return json.dumps({"format": 1, "files": recorded})[:40]


def _of_another_format(recorded: dict) -> str:  # another rag-lsp's: its entries mean other things
    return json.dumps({"format": 999, "files": {name: [size + 1, mtime, crc] for name,
                                                (size, mtime, crc) in recorded.items()}})


@pytest.mark.parametrize("digests", [_cut_short, _of_another_format])
def test_an_unreadable_digests_file_is_recorded_afresh(workspace, digests, caplog):
    """The digests are only a check: a file of them that cannot be read, or was written in
    another format, is no reason to refuse the index (nor to compare its entries). It is
    trusted on first sight, as an index without digests is."""
    (workspace.index_dir / INTEGRITY_NAME).write_text(digests(_recorded(workspace)),
                                                      encoding="utf-8")
    reopened = _reopened(workspace)
    assert reopened.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"
    assert reopened.index().rebuilt_because == ""
    assert set(_recorded(reopened)) == _covered(reopened)
    if digests is _cut_short:
        assert "is unreadable" in caplog.text and "recording the index's files afresh" \
            in caplog.text


def test_a_copied_index_whose_mtimes_moved_is_not_damage(workspace):
    """A copy (``cp -r``) gives every file a new mtime and the same bytes: read and found
    intact, and the next run notes the new mtimes so opening stops reading them."""
    later = time.time_ns() + 10**10
    copied = _covered(workspace)
    for name in copied:
        os.utime(workspace.index_dir / name, ns=(later, later))
    reopened = _reopened(workspace)
    assert reopened.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"
    assert reopened.index().rebuilt_because == ""
    assert {_recorded(reopened)[name][1] for name in copied} == {later}


READER = """
import json, sys
from pathlib import Path
from rag_lsp.config import Settings
from rag_lsp.store.integrity import FileDigests
from rag_lsp.workspace import Workspace

root, stop = Path(sys.argv[1]), Path(sys.argv[2])
ws = Workspace.open(root, Settings.from_dict({}))
digests = FileDigests(ws.index_dir, ("chunks.lance", "files.lance"))
rounds = 0
while not stop.exists() or rounds < 3:
    rounds += 1
    line = {}
    try:
        fresh = Workspace.open(root, Settings.from_dict({}), embedder=ws.embedder)
        line["hits"] = len(fresh.search("cache", mode="lexical", threshold=0.0).results)
        line["damage"] = digests.damage(full=True)
    except Exception as exc:
        line["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(line), flush=True)
"""


def test_a_reader_process_sees_no_damage_while_another_writes(workspace, sample_root,
                                                             tmp_path):
    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(sample_root), str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lru = sample_root / "src/cache/lru.py"
        source = lru.read_text()
        for n in range(12):
            lru.write_text(source + f"\n\ndef cache_step_{n}(cache):\n    return {n}\n")
            (sample_root / f"extra_{n % 3}.py").write_text(f"def cache_extra_{n}():\n    pass\n")
            workspace.update(["src/cache/lru.py", f"extra_{n % 3}.py"])
            if n % 4 == 3:
                workspace.compact()
            time.sleep(0.05)
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=120)
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines, err
    assert [line for line in lines if "error" in line or line.get("damage")] == []
    assert _reopened(workspace).index().rebuilt_because == ""


def test_cli_search_refuses_a_damaged_index_and_index_rebuilds_it(workspace):
    """The probe as a user meets it: exit 1 with the file and the fix, never other results
    with exit 0; `rag-lsp index` rebuilds by itself and says so; then the same answers."""
    root = str(workspace.root)
    before = rag("search", "follow redirects", "--root", root, "--json")
    assert before.returncode == 0, before.stderr
    damaged = _chunk_data_file(workspace)
    _garbage_in_the_middle(damaged)
    refused = rag("search", "follow redirects", "--root", root, "--json")
    assert refused.returncode == 1
    error = json.loads(refused.stdout)["error"]
    assert damaged.name in error and "rag-lsp index --full" in error
    rebuilt = rag("index", root)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "rebuilt the index from the workspace" in rebuilt.stderr
    after = rag("search", "follow redirects", "--root", root, "--json")
    assert json.loads(after.stdout)["results"] == json.loads(before.stdout)["results"]


def test_a_server_opening_a_damaged_index_rebuilds_it_before_answering_wrong(workspace):
    """Bit rot found by the run the server starts when it opens the folder (in the
    background, like every run); the folder's status says the index was rebuilt and why."""
    _garbage_in_the_middle(_chunk_data_file(workspace), keep_mtime=True)
    server = RawServer(workspace.root)
    try:
        ready = server.wait_for(lambda n: n["method"] == "rag/indexStatus"
                                and n["params"]["state"] == "ready")
        assert "damaged and has been rebuilt" in ready["params"]["message"]
        assert "changed after it was written" in ready["params"]["message"]
        answer = server.request("rag/search", {"query": "follow redirects"})
        assert answer["result"]["results"][0]["path"] == "src/http/client.py", answer
    finally:
        server.close()


def test_garbage_in_a_knowledge_file_is_reported_and_the_entries_kept(workspace):
    """Knowledge cannot be rebuilt from the workspace: damage is reported with the fix on
    every call, nothing is deleted, and the code index keeps answering."""
    kb = workspace.knowledge
    for n in range(3):
        kb.add("debug", f"Finding {n}: redirects loop when the Location header is relative.")
    data_dir = workspace.index_dir / "knowledge.lance" / "data"
    damaged = max(data_dir.iterdir(), key=lambda p: p.stat().st_size)
    _garbage_in_the_middle(damaged)
    kept = {p.name: p.read_bytes() for p in data_dir.iterdir()}
    reopened = _reopened(workspace)
    for call in (lambda: reopened.knowledge.list("debug"),
                 lambda: reopened.knowledge.search("debug", "redirect loop")):
        with pytest.raises(IndexCorruptError) as error:
            call()
        message = str(error.value)
        assert "knowledge base" in message and damaged.name in message
        assert "restore it from a backup" in message
    assert reopened.search("follow redirects", top_k=1).results[0].path == "src/http/client.py"
    assert reopened.index().rebuilt_because == ""  # the code index is fine: not rebuilt
    reopened.index(full=True)
    assert {p.name: p.read_bytes() for p in data_dir.iterdir()} == kept


def test_a_compaction_records_the_files_it_writes_before_anyone_else_writes(tmp_path):
    """``ChunkStore.optimize`` records its own files' digests when it commits (as every
    write does), not only when the writer's lock is let go later."""
    store = lance_store.ChunkStore(tmp_path / "ix", 8, create=True)
    rng = np.random.default_rng(3)
    for path, tag in (("a.py", "alpha"), ("b.py", "beta"), ("c.py", "gamma")):
        store.replace_files([record(path, 3)], rows_for(path, rng, 3, tag))
    store.ensure_fts_index()
    before = set(table_files(tmp_path / "ix", ("chunks.lance", "files.lance")))
    store.optimize()
    covered = set(table_files(tmp_path / "ix", ("chunks.lance", "files.lance")))
    assert covered - before, "the compaction wrote no file"
    recorded = json.loads((tmp_path / "ix" / INTEGRITY_NAME).read_text("utf-8"))["files"]
    assert covered - before <= set(recorded)
