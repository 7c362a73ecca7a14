"""Searches before indexing: while a search runs, an indexing run neither embeds nor does its
Python work (reading, chunking, deriving terms), which would hold the interpreter the search
needs. Real model, real LanceDB."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest

from rag_lsp import priority
from rag_lsp.config import Settings
from rag_lsp.indexing import indexer
from rag_lsp.indexing.indexer import Indexer
from rag_lsp.server.methods import RAG_SEARCH
from rag_lsp.workspace import Workspace
from tests.conftest import write_files
from tests.inprocess_lsp import InProcessServer, capabilities_of

HOLD_SECONDS = 0.6  # below priority.MAX_WAIT_SECONDS, after which indexing goes on anyway
# No draft pass (it pauses per file too, before any file is chunked): what is tested here is
# the pauses of chunking and of deriving each chunk's columns.
WITHOUT_DRAFT = {"lexicalFirst": False}


def _many_files(count: int) -> dict[str, str]:
    return {f"pkg/module_{n}.py": f"def handler_{n}(request):\n"
                                  f"    \"\"\"Handle request kind {n}.\"\"\"\n"
                                  f"    return request.get({n})\n" for n in range(count)}


def test_a_run_does_not_chunk_files_while_a_search_runs(tmp_path, embedder, monkeypatch):
    root = tmp_path / "repo"
    write_files(root, _many_files(30))
    ws = Workspace.open(root, Settings.from_dict({"indexPath": str(tmp_path / "ix"),
                                                  **WITHOUT_DRAFT}), embedder=embedder)
    prepared: list[float] = []
    original = Indexer._prepare

    def timed_prepare(self, *args, **kwargs):
        prepared.append(time.monotonic())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Indexer, "_prepare", timed_prepare)
    reports = []
    run = threading.Thread(target=lambda: reports.append(ws.index()))
    with ws.priority.searching():
        run.start()
        time.sleep(HOLD_SECONDS)
        released = time.monotonic()
    run.join(timeout=120)
    assert not run.is_alive()
    assert len(prepared) == 30
    assert min(prepared) >= released  # not one file was read and chunked during the search
    assert reports[0].files_indexed == 30


def test_a_run_pauses_before_each_chunk_it_derives_columns_for(tmp_path, embedder,
                                                               monkeypatch):
    """The columns derived per chunk (terms, defined names, full-text text) take ~0.5 ms
    each: a run checks for searches before each chunk, not once per write batch."""
    root = tmp_path / "repo"
    write_files(root, _many_files(30))
    ws = Workspace.open(root, Settings.from_dict({"indexPath": str(tmp_path / "ix"),
                                                  **WITHOUT_DRAFT}), embedder=embedder)
    events: list[str] = []
    ws.priority.wait_turn = lambda: events.append("pause")  # what the indexer is handed
    derive_terms = indexer.text_terms

    def recorded(text: str):
        events.append("terms")
        return derive_terms(text)

    monkeypatch.setattr(indexer, "text_terms", recorded)
    report = ws.index()
    assert report.chunks_written >= 30 and events.count("terms") == report.chunks_written
    # every chunk's columns come right after a pause, never straight after another chunk's
    assert all(events[i - 1] == "pause" for i, e in enumerate(events) if e == "terms")


def test_a_steady_stream_of_searches_only_slows_indexing_down(monkeypatch):
    """Each pause waits at most MAX_WAIT_SECONDS; after such a wait indexing goes on for as
    long again without pausing, so searches that never stop cannot stall it."""
    monkeypatch.setattr(priority, "MAX_WAIT_SECONDS", 0.2)
    first = priority.SearchFirst()
    with first.searching():  # a search that does not end
        started = time.monotonic()
        first.wait_turn()
        waited = time.monotonic() - started
        started = time.monotonic()
        for _ in range(20):  # a run's next pauses, within the grace period
            first.wait_turn()
        passed = time.monotonic() - started
        time.sleep(0.25)
        started = time.monotonic()
        first.wait_turn()  # the grace is over: it waits again
        waited_again = time.monotonic() - started
    assert 0.15 <= waited and passed < 0.15 and 0.15 <= waited_again
    started = time.monotonic()
    first.wait_turn()  # nothing searching: no wait at all
    assert time.monotonic() - started < 0.05


async def test_the_server_marks_a_search_before_the_engine_runs_it(tmp_path, embedder):
    """rag/search holds indexing back from the moment the request is handled, so the hand-overs
    between the server's threads do not wait for an indexing run's Python work."""
    root = tmp_path / "repo"
    write_files(root, _many_files(3))
    async with InProcessServer(embedder=embedder, answer_requests=True) as lsp:
        await lsp.start(root, capabilities_of("visual-studio-code"),
                        {"indexPath": str(tmp_path / "ix")})
        await lsp.wait_for_state("ready")
        (folder,) = lsp.server.folders.values()
        seen: list[int] = []
        engine_search = folder.workspace.search

        def search(*args, **kwargs):
            seen.append(lsp.server.priority._active)  # noqa: SLF001
            return engine_search(*args, **kwargs)

        folder.workspace.search = search
        await lsp.result(RAG_SEARCH, {"query": "handle request kind 2"})
        assert seen == [1]
        assert lsp.server.priority._active == 0  # noqa: SLF001


def _niceness() -> int:
    import os

    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def _niceness_of_threads(name: str) -> set[int]:
    """The nice values of this process's threads called ``name`` (Linux)."""
    from pathlib import Path

    found = set()
    for task in Path("/proc/self/task").iterdir():
        try:  # a thread may end meanwhile
            if (task / "comm").read_text().strip() == name:
                stat = (task / "stat").read_text()
                found.add(int(stat[stat.rindex(")") + 2:].split()[16]))
        except OSError:
            pass
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_background_threads_run_below_the_searches_priority(tmp_path, embedder):
    """Indexing's writer thread and the in-memory copy's loader run BACKGROUND_NICENESS below
    the rest; LanceDB's worker threads, which serve searches too, do not (a thread pool
    started from a lowered thread would inherit its priority)."""
    from rag_lsp.server.jobs import FolderJobs

    base = _niceness()
    jobs = FolderJobs()
    try:
        writer = asyncio.run(jobs.write(_niceness))
    finally:
        jobs.close()
    assert writer == min(19, base + priority.BACKGROUND_NICENESS)
    assert _niceness() == base  # the caller's own thread is left alone

    loaded: list[int] = []
    root = tmp_path / "repo"
    write_files(root, _many_files(3))
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    store = ws._index.store()  # noqa: SLF001
    load = store._vectors._load  # noqa: SLF001
    store._vectors._load = lambda: (loaded.append(_niceness()), load())[1]  # noqa: SLF001
    deadline = time.monotonic() + 30
    while store.vectors_in_memory() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert loaded == [min(19, base + priority.BACKGROUND_NICENESS)]
    assert _niceness_of_threads("lancedb-tokio-w") == {base}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_lancedb_first_used_by_the_writer_thread_still_serves_at_normal_priority(tmp_path):
    """The first use of LanceDB in a process may come from the server's writer thread: its
    worker threads must not inherit that thread's lowered priority."""
    import subprocess
    import textwrap

    script = textwrap.dedent(f"""
        import asyncio, json, os, sys
        from pathlib import Path
        from rag_lsp.server.jobs import FolderJobs
        assert "lancedb" not in sys.modules

        def first_use():
            import lancedb
            lancedb.connect({str(tmp_path / "db")!r}).create_table("t", [{{"a": 1}}]).count_rows()

        jobs = FolderJobs()
        asyncio.run(jobs.write(first_use))
        nice = set()
        for task in Path("/proc/self/task").iterdir():
            try:  # a thread may end meanwhile
                if (task / "comm").read_text().strip() == "lancedb-tokio-w":
                    stat = (task / "stat").read_text()
                    nice.add(int(stat[stat.rindex(")") + 2:].split()[16]))
            except OSError:
                pass
        print(json.dumps(sorted(nice)), flush=True)
        os._exit(0)  # what is checked is above; LanceDB's threads at exit are not the point
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"[{_niceness()}]", done.stderr
