"""The per-folder job owner: one queue of writes, and every task and timer cancelled on close
and shutdown, without an error for the user and without a torn write.

The owner alone first; then the server around it, in this process (``inprocess_lsp``), where a
test can hold back the client's answer or keep the writer thread inside a commit."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

import pytest

from rag_lsp.errors import WorkspaceClosedError
from rag_lsp.indexing import indexer
from rag_lsp.server.jobs import FolderJobs
from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.workspace import Workspace
from tests.conftest import make_sample_root, write_files
from tests.inprocess_lsp import WAIT_SECONDS, InProcessServer


async def until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_writes_run_one_at_a_time_in_the_order_asked():
    jobs = FolderJobs()
    order: list[int] = []
    inside = threading.Semaphore(1)

    def write(n: int) -> int:
        assert inside.acquire(blocking=False), "two writes at once"
        time.sleep(0.01)
        order.append(n)
        inside.release()
        return n

    results = await asyncio.gather(*(jobs.write(write, n) for n in range(6)))
    assert results == order == list(range(6))
    jobs.close()


async def test_close_cancels_tasks_and_timers_and_drops_queued_writes():
    jobs = FolderJobs()
    release = threading.Event()
    started: list[str] = []

    def slow_write() -> None:
        started.append("slow")
        release.wait(5)
        started.append("slow done")

    async def waits_for_its_write() -> None:
        await jobs.write(slow_write)

    fired: list[str] = []

    async def timer_job() -> None:
        fired.append("timer")

    task = jobs.start(waits_for_its_write())
    await until(lambda: started == ["slow"])
    queued = asyncio.ensure_future(jobs.write(started.append, "queued"))
    await asyncio.sleep(0)  # submitted: waiting behind the slow write
    jobs.after("flush", 0.05, timer_job)
    assert jobs.has_timer("flush")

    jobs.close()
    assert jobs.closed and jobs.cancel.is_set() and not jobs.has_timer("flush")
    await asyncio.sleep(0.1)  # past the timer's time: it must not fire
    assert fired == []
    # The task is cancelled at once, not when the write it awaits is done…
    assert task.cancelled() and started == ["slow"]
    release.set()
    await jobs.stopped()  # …which still finishes whole; the queued one never ran
    assert started == ["slow", "slow done"] and queued.cancelled()
    # Nothing new starts on a closed folder.
    with pytest.raises(WorkspaceClosedError):
        await jobs.write(started.append, "late")
    late = jobs.start(timer_job())
    jobs.after("compact", 0, timer_job)
    await asyncio.sleep(0.01)
    assert late.cancelled() and fired == []


async def test_a_task_awaiting_anything_is_cancelled_on_close_and_its_cleanup_runs():
    jobs = FolderJobs()
    steps: list[str] = []

    async def awaits_forever() -> None:
        try:
            await asyncio.Event().wait()  # e.g. the client's answer that never comes
        finally:
            steps.append("cleaned up")  # a run ends its $/progress here

    task = jobs.start(awaits_forever())
    await asyncio.sleep(0.01)
    jobs.close()
    await until(task.done, timeout=2)
    assert task.cancelled() and steps == ["cleaned up"]


async def test_a_failed_task_is_logged_once_and_a_cancelled_one_not_at_all(caplog):
    jobs = FolderJobs()

    async def fails() -> None:
        raise RuntimeError("boom")

    failed = jobs.start(fails())
    cancelled = jobs.start(asyncio.Event().wait())
    await until(failed.done)
    jobs.close()
    await until(cancelled.done)
    await asyncio.sleep(0.01)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [(r.getMessage(), str(r.exc_info[1])) for r in errors] == [
        ("background task failed", "boom")]


async def test_a_timer_replaces_the_one_of_the_same_name():
    jobs = FolderJobs()
    fired: list[int] = []

    def job(n: int):
        async def run() -> None:
            fired.append(n)
        return run

    jobs.after("flush", 0.2, job(1))
    jobs.after("flush", 0.01, job(2))
    await until(lambda: fired)
    await asyncio.sleep(0.3)  # past the first timer's time: it was replaced
    assert fired == [2]
    jobs.close()


# ---- the server around it -----------------------------------------------------------------

PROGRESS = {"window": {"workDoneProgress": True}}  # runs ask for a progress token, as VS Code


def _problems(caplog, lsp: InProcessServer) -> list[str]:
    """What would reach the user or the log as a failure."""
    return lsp.shown_errors() + [f"{r.levelname} {r.name}: {r.getMessage()}"
                                 for r in caplog.records if r.levelno >= logging.WARNING]


def _folder_removed(root: Path) -> dict:
    return {"event": {"added": [], "removed": [{"uri": root.as_uri(), "name": root.name}]}}


async def test_a_late_answer_to_a_request_no_longer_awaited_is_dropped_quietly(caplog):
    """pygls sets the answer on the cancelled future; the InvalidStateError that raises
    reached the user as "Error in server: CANCELLED: <Future …>"."""
    async with InProcessServer() as lsp:
        asking = asyncio.ensure_future(lsp.server.work_done_progress.create_async("t"))
        request = await lsp.wait_for(lambda m: m.get("method") == "window/workDoneProgress/create")
        asking.cancel()
        await asyncio.gather(asking, return_exceptions=True)
        lsp.answer(request)
        await lsp.request("rag/status")  # answered after the late answer was handled
        assert _problems(caplog, lsp) == []


async def test_closing_a_folder_cancels_its_run_awaiting_the_client_without_an_error(
        tmp_path, caplog):
    root = make_sample_root(tmp_path)
    async with InProcessServer() as lsp:
        await lsp.start(root, PROGRESS)
        create = await lsp.wait_for(lambda m: m.get("method") == "window/workDoneProgress/create")
        (folder,) = lsp.server.folders.values()
        run = folder.jobs.run
        assert run is not None and not run.done()  # awaiting the client's answer

        lsp.notify("workspace/didChangeWorkspaceFolders", _folder_removed(root))
        await until(run.done, timeout=5)  # not when (or if) the client answers
        assert run.cancelled()
        lsp.answer(create)  # too late: dropped without a word
        await lsp.request("rag/status")
        assert _problems(caplog, lsp) == []
        token = create["params"]["token"]
        assert not [m for m in lsp.sent if m.get("method") == "$/progress"
                    and m["params"]["token"] == token]  # no run began on that token
        assert folder.workspace.status().files == 0  # nothing was written


@pytest.fixture
def writes(monkeypatch):
    """Index commits held at the door: each records what it writes, then waits for
    ``release`` (then commits, whole). Batches of a few chunks, so a run has many."""
    calls: list[tuple[int, int]] = []  # (files, chunks) of each commit
    entered, release = threading.Event(), threading.Event()
    commit = ChunkStore.replace_files

    def held(store, records, rows, removed=()):
        calls.append((len(records), len(rows)))
        entered.set()
        release.wait(WAIT_SECONDS)
        return commit(store, records, rows, removed)

    monkeypatch.setattr(indexer, "WRITE_BATCH_CHUNKS", 4)
    monkeypatch.setattr(ChunkStore, "replace_files", held)
    yield calls, entered, release
    release.set()


def _many_files(root: Path) -> Path:
    write_files(root, {f"pkg/module_{i:02}.py": "".join(
        f'def step_{i}_{n}(value):\n    """Step {n} of stage {i}."""\n    return value + {n}\n\n\n'
        for n in range(3)) for i in range(30)})
    return root


@pytest.mark.parametrize("how", ["folder removed", "shutdown"])
async def test_closing_mid_index_cancels_the_run_at_once_and_writes_no_later_batch(
        tmp_path, caplog, writes, how):
    calls, entered, release = writes
    root = _many_files(tmp_path / "repo")
    async with InProcessServer() as lsp:
        await lsp.start(root)
        await until(entered.is_set, timeout=WAIT_SECONDS)  # the first commit is under way
        (folder,) = lsp.server.folders.values()
        run = folder.jobs.run
        if how == "shutdown":
            assert "result" in await lsp.request("shutdown")
        else:
            lsp.notify("workspace/didChangeWorkspaceFolders", _folder_removed(root))
        await until(run.done, timeout=5)
        assert run.cancelled() and not release.is_set()  # it did not wait for the commit
        release.set()
        await folder.jobs.stopped()  # the commit under way finished, whole
        assert len(calls) == 1, calls  # and the run started no other
        files, chunks = calls[0]
        status = Workspace.open(root, embedder=lsp.server.embedder).status()
        assert (status.files, status.chunks) == (files, chunks)
        assert _problems(caplog, lsp) == []


async def test_closing_a_folder_with_a_queued_rebuild_reports_no_error(sample_root, caplog,
                                                                     embedder):
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(sample_root, options={})
        await lsp.wait_for_state("ready")
        (folder,) = lsp.server.folders.values()
        for _ in range(3):  # a run, and rebuilds queued behind it
            assert "result" in await lsp.request("rag/reindex", {"full": True})
        lsp.notify("workspace/didChangeWorkspaceFolders", _folder_removed(sample_root))
        await until(lambda: folder.jobs.closed, timeout=5)
        await folder.jobs.stopped()  # the write under way finished; the queued ones dropped
        await until(lambda: folder.jobs.run is None or folder.jobs.run.done(), timeout=5)
        await asyncio.sleep(1)  # whatever the cancelled work reports on its way out lands
        status = await lsp.result("rag/status", {})
        assert status["folders"] == []
        assert _problems(caplog, lsp) == []


async def test_a_malformed_notification_is_logged_not_shown_to_the_user(caplog):
    """pygls showed "Error in server: unhashable type: 'list'" in the editor for a cancel
    whose id was a list: nothing a user can act on."""
    async with InProcessServer() as lsp:
        lsp.notify("$/cancelRequest", {"id": [1]})
        lsp.notify("$/cancelRequest", {})
        await lsp.request("rag/status")  # still answering
        assert lsp.shown_errors() == []
        logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("a message from the client could not be handled" in m for m in logged)


async def test_an_update_failing_unexpectedly_puts_the_folder_in_error_saying_so(
        tmp_path, embedder, monkeypatch):
    """A bug in an update was only in the log: the folder still said "ready", its change was
    never searchable, and nothing told the user why."""
    root = make_sample_root(tmp_path)

    def broken(self, paths, *args, **kwargs):
        raise ValueError("a bug in the update")

    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(root)
        await lsp.wait_for_state("ready")
        after = len(lsp.statuses())
        monkeypatch.setattr(Workspace, "update", broken)
        (root / "src" / "new.py").write_text("def refund_escrow():\n    return 2\n")
        lsp.notify("workspace/didChangeWatchedFiles", {"changes": [
            {"uri": (root / "src" / "new.py").as_uri(), "type": 1}]})
        status = await lsp.wait_for_state("error", after=after)
        message = status["folders"][0]["message"]
        assert "a bug in the update" in message and "server log" in message, status
