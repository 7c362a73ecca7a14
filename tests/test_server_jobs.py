"""The per-folder job owner: one queue of writes, and every task and timer cancelled on close."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from rag_lsp.errors import WorkspaceClosedError
from rag_lsp.server.jobs import FolderJobs


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


async def test_close_cancels_timers_and_drops_queued_writes():
    jobs = FolderJobs()
    release = threading.Event()
    started: list[str] = []

    def slow_write() -> None:
        started.append("slow")
        release.wait(5)

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
    release.set()
    await jobs.stopped()  # the write under way finished; the queued one never ran
    await until(task.done)
    assert started == ["slow"] and queued.cancelled()
    # Nothing new starts on a closed folder.
    with pytest.raises(WorkspaceClosedError):
        await jobs.write(started.append, "late")
    late = jobs.start(timer_job())
    jobs.after("compact", 0, timer_job)
    await asyncio.sleep(0.01)
    assert late.cancelled() and fired == []


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
