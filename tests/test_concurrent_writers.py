"""Several processes on one index: one writes at a time, the others read and follow.

LanceDB allows one writer per table; before the writer lock, two `rag-lsp index` runs (or a
server and the CLI) on one folder both replaced the same files and the index ended with
duplicate rows. These tests run real processes and real LanceDB on disk.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import lancedb
import pytest

from rag_lsp.config import Settings
from rag_lsp.errors import IndexBusyError
from rag_lsp.store.writer_lock import WriterLock
from rag_lsp.workspace import Workspace

from .conftest import SAMPLE_FILES, write_files
from .raw_lsp import RawServer

TOPICS = ["parsing", "caching", "routing", "logging", "retries", "sessions", "queues", "auth"]


def _many_files(root: Path, count: int) -> None:
    """Enough distinct files that an indexing run takes a few seconds."""
    files = dict(SAMPLE_FILES)
    for n in range(count):
        topic = TOPICS[n % len(TOPICS)]
        body = "\n\n".join(
            f'def {topic}_step_{n}_{k}(value):\n    """Handle {topic} step {k} of module {n}."""\n'
            f"    return value * {k} + {n}  # {topic} {n} {k}\n"
            for k in range(12)
        )
        files[f"pkg/{topic}/module_{n}.py"] = body
    write_files(root, files)


def _table_rows(index_dir: Path, table: str, column: str) -> list[str]:
    db = lancedb.connect(str(index_dir))
    return db.open_table(table).to_arrow().column(column).to_pylist()


def _assert_no_duplicates(index_dir: Path) -> None:
    ids = _table_rows(index_dir, "chunks", "id")
    paths = _table_rows(index_dir, "files", "path")
    assert ids, "the index is empty"
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    assert [p for p, n in Counter(paths).items() if n > 1] == []
    # every chunk belongs to a file the files table knows, and vice versa
    assert {i.split("#L")[0] for i in ids} == set(paths)


def _rag_index(root: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rag_lsp", "index", str(root), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_two_cli_index_runs_at_once_leave_no_duplicates(tmp_path):
    root = tmp_path / "repo"
    _many_files(root, 60)
    # This process holds the lock until both runs have met it (whatever the machine's
    # speed): each says whom it waits for; then they write one after the other.
    held = WriterLock(root / ".rag-lsp")
    held.acquire()
    logs = [tmp_path / f"run{n}.err" for n in (1, 2)]
    runs = []
    for log in logs:
        with log.open("w") as err:
            runs.append(subprocess.Popen(
                [sys.executable, "-m", "rag_lsp", "index", str(root)],
                stdout=subprocess.DEVNULL, stderr=err, text=True))
    try:
        deadline = time.monotonic() + 120
        while not all(f"pid {held.pid}" in log.read_text() for log in logs):
            assert time.monotonic() < deadline, [log.read_text() for log in logs]
            time.sleep(0.2)
    finally:
        held.release()
    for run, log in zip(runs, logs, strict=True):
        assert run.wait(timeout=600) == 0, log.read_text()
    _assert_no_duplicates(root / ".rag-lsp")


def test_a_full_rebuild_during_another_run_leaves_no_duplicates(tmp_path):
    root = tmp_path / "repo"
    _many_files(root, 40)
    first = _rag_index(root)
    second = _rag_index(root, "--full")
    for run in (first, second):
        _out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    _assert_no_duplicates(root / ".rag-lsp")


def test_two_workspaces_writing_at_once_converge(sample_root, embedder):
    """Two engine objects on one index (two editor windows, or a server and an agent
    server in one process) interleave indexing and file updates."""
    first = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    second = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    errors: list[BaseException] = []

    def work(ws: Workspace, tag: str) -> None:
        try:
            ws.index()
            for n in range(4):
                path = sample_root / "src" / f"{tag}_{n}.py"
                path.write_text(f"def {tag}_{n}():\n    return {n}\n", encoding="utf-8")
                ws.update([str(path)])
                ws.update(["src/http/client.py"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(ws, tag))
               for ws, tag in ((first, "alpha"), (second, "beta"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    first.index()
    _assert_no_duplicates(first.index_dir)
    paths = set(_table_rows(first.index_dir, "files", "path"))
    assert {f"src/{t}_{n}.py" for t in ("alpha", "beta") for n in range(4)} <= paths
    first.close()
    second.close()


def test_a_reader_follows_another_writers_changes(sample_root, embedder):
    writer = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    writer.index()
    reader = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    assert reader.search("zebra stripes").results == []
    (sample_root / "zoo.py").write_text(
        'def count_zebra_stripes(zebra):\n    """How many stripes a zebra has."""\n'
        "    return len(zebra.stripes)\n", encoding="utf-8")
    writer.update(["zoo.py"])
    hits = reader.search("count_zebra_stripes", mode="lexical").results
    assert [h.path for h in hits][:1] == ["zoo.py"]
    assert reader.status().files == writer.status().files


def test_the_lock_names_its_holder_and_a_dead_holder_is_taken_over(tmp_path):
    index_dir = tmp_path / "index"
    held = WriterLock(index_dir)
    held.acquire()
    with pytest.raises(IndexBusyError) as busy:
        WriterLock(index_dir).acquire(wait=False)
    assert f"pid {held.owner().pid}" in str(busy.value)
    assert busy.value.retryable
    held.release()
    # A holder killed with -9 leaves its lock file behind, but not the lock.
    child = subprocess.run(
        [sys.executable, "-c",
         "import os, sys; from pathlib import Path; "
         "from rag_lsp.store.writer_lock import WriterLock; "
         f"WriterLock(Path({str(index_dir)!r})).acquire(); os.kill(os.getpid(), 9)"],
        capture_output=True, text=True, timeout=60)
    assert child.returncode == -9, child.stderr
    taken = WriterLock(index_dir)
    taken.acquire(wait=False)
    assert taken.owner().pid == taken.pid
    taken.release()


def test_waiting_for_the_lock_can_be_given_up(tmp_path):
    index_dir = tmp_path / "index"
    held = WriterLock(index_dir)
    held.acquire()
    seen = []

    class GiveUp(Exception):
        pass

    def on_wait(owner):
        seen.append(owner.pid)
        raise GiveUp

    with pytest.raises(GiveUp):
        WriterLock(index_dir).acquire(on_wait=on_wait)
    assert seen == [held.pid]
    held.release()


def _search_paths(server: RawServer, query: str) -> list[str]:
    answer = server.request("rag/search", {"query": query, "mode": "lexical"})
    assert "result" in answer, answer
    return [r["path"] for r in answer["result"]["results"]]


def test_two_servers_on_one_folder_under_edits_converge(tmp_path):
    """Two editor windows on one folder: both index, both watch, the index converges."""
    root = tmp_path / "repo"
    _many_files(root, 30)
    servers = [RawServer(root), RawServer(root)]
    try:
        for server in servers:
            server.wait_for_state("ready")
        for n in range(5):
            (root / f"new_{n}.py").write_text(
                f"def giraffe_neck_{n}():\n    return 'giraffe {n}'\n", encoding="utf-8")
        (root / "src/cache/lru.py").write_text(
            "def okapi_cache():\n    return 'okapi'\n", encoding="utf-8")
        (root / "src/auth/passwords.py").unlink()
        deadline = time.monotonic() + 120
        wanted = {f"new_{n}.py" for n in range(5)} | {"src/cache/lru.py"}
        while True:
            found = [set(_search_paths(s, "giraffe_neck okapi_cache")) for s in servers]
            gone = [not _search_paths(s, "hash_password") for s in servers]
            if all(wanted <= f for f in found) and all(gone):
                break
            assert time.monotonic() < deadline, (found, gone)
            time.sleep(0.5)
    finally:
        for server in servers:
            server.close()
    _assert_no_duplicates(root / ".rag-lsp")
    indexed = set(_table_rows(root / ".rag-lsp", "files", "path"))
    assert wanted <= indexed and "src/auth/passwords.py" not in indexed


def test_a_server_waits_for_another_writer_and_says_for_whom(sample_root):
    """The first indexing run of a folder whose index another process is writing waits,
    shows whom it waits for as the folder's status, and indexes once the lock is free."""
    index_dir = sample_root / ".rag-lsp"
    lock = WriterLock(index_dir)
    lock.acquire()  # this test process plays the other writer
    server = RawServer(sample_root)
    try:
        deadline = time.monotonic() + 60
        while not any("waiting for" in n["params"].get("message", "")
                      for n in server.notifications if n["method"] == "rag/indexStatus"):
            assert time.monotonic() < deadline, server.notifications
            server.request("rag/status", {})
        waiting = [n["params"] for n in server.notifications if n["method"] == "rag/indexStatus"
                   and "waiting for" in n["params"].get("message", "")]
        assert f"pid {lock.pid}" in waiting[0]["message"]
        assert waiting[0]["state"] == "indexing"
        lock.release()
        server.wait_for_state("ready")
        assert _search_paths(server, "follow_redirects")[:1] == ["src/http/client.py"]
    finally:
        lock.release()
        server.close()
