"""bench/server_latency.py reports each search phase part by part, from the server's own
``timings``, and nothing for a server too old to give them; spaces out the searches it
compares with those during a run; and says who used the cores."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import server_latency  # noqa: E402
from server_latency import PARTS, SPACING_SECONDS, parts_stats, search_alone  # noqa: E402


def test_each_part_gets_its_own_statistics():
    timings = [{"engineMs": 10.0 + i, "queryEmbeddingMs": 5.0, "vectorMs": 2.0 * i,
                "lexicalMs": 1.0, "rankingMs": 3.0} for i in range(20)]
    figures = parts_stats(timings)
    assert set(figures) == set(PARTS)
    assert figures["engineMs"]["n"] == 20 and figures["engineMs"]["max_ms"] == 29.0
    assert figures["queryEmbeddingMs"]["p50_ms"] == 5.0
    assert figures["vectorMs"]["p95_ms"] > figures["vectorMs"]["p50_ms"]


def test_a_server_without_timings_gives_no_parts():
    assert parts_stats([]) == {}


class _Server:
    """Answers every search at once. Its folder is ``state``; with ``ready_after`` it is
    ready from that search on (a run that ends)."""

    def __init__(self, state: str = "ready", ready_after: int | None = None) -> None:
        self.asked: list[str] = []
        self.statuses = [{"state": state}]
        self.ready_after = ready_after

    async def search(self, query: str) -> dict:
        self.asked.append(query)
        if len(self.asked) == self.ready_after:
            self.statuses.append({"state": "ready"})
        return {"tookMs": 1.0}


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    """The pauses the bench takes, taken at once (no timing in the test). The bench's
    ``asyncio`` is the module itself: patched for the test only."""
    taken: list[float] = []

    async def pause(seconds: float) -> None:
        taken.append(seconds)

    monkeypatch.setattr(server_latency.asyncio, "sleep", pause)
    return taken


@pytest.mark.parametrize("spaced", [False, True])
def test_idle_searches_are_spaced_only_when_asked(spaced, pauses):
    server = _Server()
    figures = asyncio.run(search_alone(server, ["a", "b", "c"], spaced=spaced))
    assert server.asked == ["a", "b", "c"] and figures["lsp"]["n"] == 3
    assert pauses == ([SPACING_SECONDS] * 2 if spaced else [])


def test_searches_during_a_run_stop_when_it_ends(pauses):
    server = _Server("indexing", ready_after=2)  # the run ends during the second search
    figures = asyncio.run(search_alone(server, ["a", "b", "c", "d"], while_running=True))
    assert server.asked == ["a", "b"] and figures["lsp"]["n"] == 2
    assert pauses == [SPACING_SECONDS] * 2  # the last pause comes before the check


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_usage_tells_the_server_from_its_children():
    """A parent that sleeps and a child that computes: the cores go to the child, at most
    one of them (a busy loop has one thread), and what is used and idle fits the machine."""
    from server_latency import ServerUsage

    script = ("import subprocess, sys\n"
              "child = subprocess.Popen([sys.executable, '-c', "
              "'import time\\nend = time.time() + 20\\nwhile time.time() < end: pass'])\n"
              "print('started', flush=True)\n"
              "child.wait()\n")
    # A session of their own: the busy child goes with its parent when the test ends.
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                          start_new_session=True) as parent:
        try:
            assert parent.stdout.readline().strip() == "started"

            async def watch() -> dict:
                async with ServerUsage(parent.pid) as usage:
                    await asyncio.sleep(2.0)
                return usage.figures()

            figures = asyncio.run(asyncio.wait_for(watch(), timeout=30))
        finally:
            os.killpg(parent.pid, signal.SIGKILL)
    cores = os.cpu_count() or 1
    assert 0.3 < figures["children_cores"] <= 1.2, figures  # ticks made seconds, per second
    assert figures["server_cores"] < 0.2, figures
    assert 0 <= figures["idle_cores"] <= cores, figures
    assert figures["idle_cores"] + figures["children_cores"] <= cores + 0.2, figures
    assert figures["children_peak_rss_mb"] > 0 and figures["server_peak_rss_mb"] > 0
