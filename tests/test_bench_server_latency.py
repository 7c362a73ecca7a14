"""bench/server_latency.py reports each search phase part by part, from the server's own
``timings``, and nothing for a server too old to give them; spaces out the searches it
compares with those during a run; says who used the cores; and with ``--model-sleep`` starts
a server whose index runs sleep instead of running the model (bench/paced_model)."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import server_latency  # noqa: E402
from compaction_spans import (  # noqa: E402
    COMPACTED,
    TimedLog,
    beside_compactions,
    compaction_spans,
    timeline,
)
from server_latency import (  # noqa: E402
    MODEL_SLEEP_VARIABLE,
    PACED_MODEL,
    PARTS,
    SPACING_SECONDS,
    check_paced,
    parts_stats,
    print_table,
    search_alone,
    server_env,
    start_paced,
)

REPO = Path(__file__).resolve().parents[1]


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
    ready from that search on (a run that ends); ``logs`` (search number -> message) are
    the log messages it sends while answering that search."""

    def __init__(self, state: str = "ready", ready_after: int | None = None,
                 logs: dict[int, str] | None = None) -> None:
        self.asked: list[str] = []
        self.statuses = [{"state": state}]
        self.ready_after = ready_after
        self.logs = logs or {}
        self.client = SimpleNamespace(log_messages=TimedLog())

    async def search(self, query: str) -> dict:
        self.asked.append(query)
        if len(self.asked) in self.logs:
            self.client.log_messages.append(SimpleNamespace(message=self.logs[len(self.asked)]))
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
    assert figures["beside_compactions"]["compactions"] == 0


@pytest.fixture
def ticking_clock(monkeypatch):
    """The wall clock as the bench reads it, a millisecond later at each reading (every
    search and message here takes no time at all)."""
    now = [1000.0]

    def tick() -> float:
        now[0] += 0.001
        return now[0]

    monkeypatch.setattr(server_latency.time, "time", tick)  # (the time module itself)
    return now


def test_searches_during_a_run_are_told_apart_by_the_compactions_beside_them(
        pauses, ticking_clock):
    """The server's compaction log lines (one during the run, with a training; one logged
    before the phase began, not counted) make spans: the searches up to the one the line
    arrived during fall in it, the one after it does not."""
    server = _Server("indexing", ready_after=3, logs={
        2: "ws: index compacted in 900 ms (of which the vector index's training and the "
           "rewrite after it: 600 ms) while indexing"})
    server.client.log_messages.append(SimpleNamespace(message="ws: index compacted in 5 ms"))
    figures = asyncio.run(search_alone(server, ["a", "b", "c"], while_running=True))
    steps = figures["beside_compactions"]
    assert steps["compactions"] == 1 and steps["trainings"] == 1
    assert steps["searches_beside"] == 2 and steps["others_p95_ms"] is not None


@pytest.mark.parametrize(("line", "settle"), [
    ("ws: index compacted in 880 ms", True),
    ("ws: index compacted in 7700 ms (of which the vector index's training and the rewrite "
     "after it: 6310 ms)", True),
    ("ws: index compacted in 880 ms while indexing", False),
    ("ws: index compacted in 7700 ms (of which the vector index's training and the rewrite "
     "after it: 6310 ms) while indexing", False),
])
def test_each_compaction_line_is_read_and_busy_save_freshness_counts_the_settles(line,
                                                                                 settle):
    from busy_save_freshness import COMPACTED as SETTLED

    found = COMPACTED.search(line)
    assert found and int(found.group(1)) in (880, 7700)
    assert (found.group(2) is not None) == ("training" in line)
    assert bool(SETTLED.search(line)) is settle


def test_a_timed_log_is_only_appended_to():
    log = TimedLog()
    log.append(SimpleNamespace(message="m"))
    with pytest.raises(TypeError):
        log.extend([SimpleNamespace(message="n")])
    with pytest.raises(TypeError):
        log.clear()
    assert len(log) == len(log.arrived) == 1


def test_compaction_spans_and_the_searches_beside_them():
    log = TimedLog()
    for message, arrived in (("ws: index compacted in 1000 ms while indexing", 110.0),
                             ("ws: 3 changed files applied", 120.0),
                             ("ws: index compacted in 500 ms", 130.0)):
        log.append(SimpleNamespace(message=message))
        log.arrived[-1] = arrived
    spans = compaction_spans(log)
    assert spans == [{"start": 109.0, "end": 110.0, "training_s": 0.0},
                     {"start": 129.5, "end": 130.0, "training_s": 0.0}]
    assert compaction_spans(log, since=111.0) == spans[1:]
    searches = [(100.0 + i, 10.0) for i in range(40)]  # one a second from 100 s
    searches[9] = (109.5, 90.0)  # inside the first compaction, and the slowest
    searches[20] = (120.0, 80.0)  # beside none, and the next slowest
    steps = beside_compactions(searches, spans)
    # 107, 108, 109.5 (the writes before, and the fold), 128, 129
    assert steps["searches_beside"] == 5
    assert steps["slowest_5pct"] == 2 and steps["slowest_5pct_beside"] == 1
    assert steps["others_p95_ms"] == 10.0 and steps["seconds"] == 1.5


def test_a_timeline_puts_searches_and_compactions_on_the_phase_clock():
    searches = [(100.5, 12.34), (101.0, 40.0), (101.5, 9.0)]
    timings = [{"vectorMs": 5.0, "lexicalMs": 4.0}, {"vectorMs": 30.0}, {}]  # the last: none
    spans = [{"start": 100.8, "end": 101.2, "training_s": 0.0}]
    line = timeline(searches, timings, spans, 100.0, ("vectorMs", "lexicalMs"))
    assert line == {"columns": ["seconds", "roundTripMs", "vectorMs", "lexicalMs"],
                    "searches": [[0.5, 12.3, 5.0, 4.0], [1.0, 40.0, 30.0, None],
                                 [1.5, 9.0, None, None]],
                    "compactions": [[0.8, 1.2]]}


def test_searches_during_a_run_keep_their_timeline(pauses, ticking_clock):
    server = _Server("indexing", ready_after=2)
    figures = asyncio.run(search_alone(server, ["a", "b", "c"], while_running=True))
    rows = figures["timeline"]["searches"]
    assert len(rows) == 2 and figures["timeline"]["compactions"] == []
    assert all(len(row) == 2 + len(PARTS) for row in rows)  # (the fake server told no parts)
    assert "timeline" not in asyncio.run(search_alone(_Server(), ["a"]))


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


@pytest.fixture
def paced_model(monkeypatch):
    """bench/paced_model/sitecustomize.py as a module of its own name (not this process's
    ``sitecustomize``), loaded with the variable unset: it patches nothing."""
    monkeypatch.delenv(MODEL_SLEEP_VARIABLE, raising=False)
    finders = list(sys.meta_path)
    spec = importlib.util.spec_from_file_location("paced_model_site",
                                                  PACED_MODEL / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sys.meta_path == finders
    return module


def test_the_server_env_puts_the_paced_model_first(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert server_env(None) is None  # the bench's own environment
    env = server_env(0.07, tmp_path / "mark")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(PACED_MODEL), "/elsewhere"]
    assert float(env[MODEL_SLEEP_VARIABLE]) == 0.07
    assert env["RAG_LSP_BENCH_MODEL_SLEEP_MARK"] == str(tmp_path / "mark")
    monkeypatch.delenv("PYTHONPATH")
    assert server_env(0.0)["PYTHONPATH"] == str(PACED_MODEL)


def test_a_paced_embedder_waits_its_turn_sleeps_and_gives_stand_in_vectors(paced_model,
                                                                          monkeypatch):
    from rag_lsp.embedding.embedder import OnnxEmbedder

    slept, turns = [], []
    monkeypatch.setattr(paced_model.time, "sleep", slept.append)

    class Embedder:
        dimension = 8

    paced_model.pace(Embedder, 0.01)
    for name in ("_take_bulk", "_put_bulk", "_run_bulk"):  # called as the real ones are
        assert (list(inspect.signature(getattr(Embedder, name)).parameters)
                == list(inspect.signature(getattr(OnnxEmbedder, name)).parameters)), name
    embedder = Embedder()
    assert embedder._take_bulk() is None
    vectors = embedder._run_bulk(None, [[101, 7, 102], [101, 9, 102], [101, 7, 102]],
                                 lambda: turns.append(1))
    assert turns == [1] and slept == [pytest.approx(0.03)]
    assert vectors.shape == (3, 8) and vectors.dtype.name == "float32"
    assert all(abs(float((v * v).sum()) - 1.0) < 1e-5 for v in vectors)
    assert (vectors[0] == vectors[2]).all() and not (vectors[0] == vectors[1]).all()
    embedder._run_bulk(None, [[1]], None)  # a call that is not background work: no turn
    assert turns == [1]


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_the_paced_model_refuses_a_pace_that_is_not_seconds(paced_model, value):
    finders = list(sys.meta_path)
    assert paced_model.install({}) is False and sys.meta_path == finders
    with pytest.raises(ValueError, match=MODEL_SLEEP_VARIABLE):
        paced_model.install({MODEL_SLEEP_VARIABLE: value})
    assert sys.meta_path == finders


@pytest.mark.parametrize("pace", [None, 0.05])
def test_the_server_process_imports_the_embedder_paced_only_when_asked(pace, tmp_path):
    """What ``--model-sleep`` changes in the server's process: its embedder's bulk calls,
    and the mark the bench checks for."""
    mark = tmp_path / "applied"
    done = subprocess.run(
        [sys.executable, "-c", "from rag_lsp.embedding.embedder import OnnxEmbedder as E; "
         "print(E._take_bulk.__qualname__, E._run_bulk.__qualname__)"],
        env=server_env(pace, mark), cwd=REPO, capture_output=True, text=True, timeout=120,
        check=True)
    names = done.stdout.split()
    if pace is None:
        assert names == ["OnnxEmbedder._take_bulk", "OnnxEmbedder._run_bulk"]
        assert not mark.exists()
    else:
        assert names == ["pace.<locals>.take_bulk", "pace.<locals>.run_bulk"]
        assert mark.read_text().strip().isdigit() and "no model" in done.stderr


class _Starting:
    """A session whose server writes the paced model's mark when it starts, or not."""

    def __init__(self, mark: Path, writes: bool) -> None:
        self.mark, self.writes = mark, writes

    async def start(self) -> dict:
        if self.writes:
            self.mark.write_text("1\n")
        return {"folders": []}


def test_the_bench_stops_when_the_server_was_not_paced(tmp_path):
    mark = tmp_path / "applied"
    check_paced(None)  # not asked for
    with pytest.raises(SystemExit, match="not patched"):
        check_paced(mark)
    assert asyncio.run(start_paced(_Starting(mark, True), mark)) == {"folders": []}
    # The first session's mark is no proof for the second: each must write its own.
    with pytest.raises(SystemExit, match="not patched"):
        asyncio.run(start_paced(_Starting(mark, False), mark))


def _figures(p95: float) -> dict:
    stats = {"n": 100, "p50_ms": p95 - 3, "p95_ms": p95, "p99_ms": p95 + 1, "max_ms": p95 + 2}
    return {"lsp": {**stats, "partial": 0}, "server_took": stats, "engine": stats,
            "server_parts": {"engineMs": stats}}


@pytest.mark.parametrize("after", [False, True])
def test_the_table_prints_results_with_and_without_the_phase_after_the_runs(after, capsys):
    fresh = {"n": 10, "p50_ms": 50.0, "p95_ms": 60.0, "p99_ms": 61.0, "max_ms": 62.0,
             "failed": 0, "server_update_p50_ms": 100.0, "update_batches": 10}
    result = {"files": 500, "chunks": 11953, "cpu_count": 2, "fresh_client": fresh,
              "fresh_watcher": fresh,
              "fresh_engine": {**fresh, "update_p50_ms": 90.0, "search_p50_ms": 13.0},
              "search_alone": _figures(19.0), "search_idle": _figures(20.0),
              "search_reindex": {**_figures(30.0), "run_seconds": 317.5, "run": "150 indexed"},
              "search_reindex_alone": {**_figures(27.0), "run_seconds": 256.8}}
    if after:
        result["search_after_spaced"] = _figures(21.4)
        result["model_sleep_seconds_a_text"] = 0.07
    print_table(result)
    out = capsys.readouterr().out
    assert "second reindex run (server alone): 256.8 s" in out
    assert ("idle after the runs" in out) == after
    assert ("bulk embedding without the model: 0.07 s a text" in out) == after
    if after:
        assert "21.4" in out.split("idle after the runs")[1]
