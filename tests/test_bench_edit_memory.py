"""bench/edit_memory.py over a day of work: each round records the compactions it ran (and
of those the ANN index's trainings), the index's segments after them and its folder's size;
the summary counts them, tells the folder after a training from the folder without one, and
says "not recorded" for a run of a checkout that recorded none. The cyclic garbage
collector's full collections are timed, and only those. The day's settings reach the measured
process as asked, a pull comes every Nth round, and counts that make no day are refused
before anything runs."""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import edit_memory  # noqa: E402

from rag_lsp.store import vector_index  # noqa: E402
from rag_lsp.store.compaction_times import CompactionTimes  # noqa: E402
from rag_lsp.store.lance_store import ChunkStore  # noqa: E402


def test_each_compaction_is_recorded_with_the_segments_it_left(monkeypatch):
    results = iter([CompactionTimes(0.7), CompactionTimes(9.2, 8.4)])
    calls = []

    def optimize(store, *args, **kwargs):
        calls.append((args, kwargs))
        return next(results)

    monkeypatch.setattr(ChunkStore, "optimize", optimize)
    monkeypatch.setattr(vector_index, "index_segments", lambda table: table.segments)
    seen = edit_memory.recording_compactions()
    store = SimpleNamespace(_chunks=SimpleNamespace(segments=3))
    assert ChunkStore.optimize(store) == CompactionTimes(0.7)  # what the store returned
    store._chunks.segments = 1
    ChunkStore.optimize(store, "around", max_segments=1)
    assert calls == [((), {}), (("around",), {"max_segments": 1})]  # passed on as they came
    assert [(times, segments) for times, segments, _ in seen] == [
        (CompactionTimes(0.7), 3), (CompactionTimes(9.2, 8.4), 1)]
    assert all(look >= 0 for *_, look in seen)


def test_full_collections_are_timed_and_the_younger_ones_are_not():
    callbacks = len(gc.callbacks)
    was_enabled = gc.isenabled()
    gc.disable()  # no collection of the interpreter's own in between
    try:
        ended = edit_memory.timing_full_collections()
        gc.collect(0)
        gc.collect(1)
        assert ended == []
        gc.collect(2)
        assert len(ended) == 1 and ended[0] >= 0
    finally:
        del gc.callbacks[callbacks:]
        if was_enabled:
            gc.enable()


def test_the_index_folder_is_measured_with_its_subfolders(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "data").write_bytes(b"x" * 2**20)
    (tmp_path / "top").write_bytes(b"x" * 2**19)
    assert edit_memory.folder_bytes(tmp_path) == 1.5 * 2**20


@pytest.mark.parametrize(("every", "pulls"), [(0, []), (1, [0, 1, 2, 3, 4, 5, 6]),
                                              (3, [2, 5]), (6, [5])])
def test_a_pull_comes_every_nth_round_the_first_of_them_the_nth(every, pulls):
    assert [n for n in range(7) if edit_memory.is_pull(n, every)] == pulls


def _round(rss: int, training: list[float] | None, segments: int | None, index_mb: int) -> dict:
    return {"rss_mb": rss, "index_s": 2.0, "search_ms": [30.0, 40.0],
            "compactions_s": None if training is None else [t + 1 for t in training] or [0.5],
            "training_s": training, "segments": segments, "index_mb": index_mb,
            "full_gc_ms": [1.5] * len(training or ())}


def test_the_summary_counts_trainings_and_tells_the_folder_after_one_apart():
    run = {"idle_mb": 318, "index_mb": 291,
           "rounds": [_round(346, [8.4], 1, 540), _round(349, [], 2, 262),
                      _round(351, [8.0], 1, 600), _round(350, [], 4, 264)]}
    summary = edit_memory.summary(run)
    assert summary["trainings"] == 2
    assert summary["training_s_total"] == 16.4
    assert summary["segments_max"] == 4
    assert summary["index_mb_at_start"] == 291
    assert summary["index_mb_without_training"] == [262, 264]
    assert summary["index_mb_after_training"] == [540, 600]
    assert summary["full_gc_ms_max"] == 1.5
    assert summary["max_mb"] == 351


def test_trainings_an_older_checkout_did_not_report_are_not_counted_as_none_run():
    run = {"idle_mb": 318, "rounds": [_round(346, None, None, 540), _round(349, [], 2, 262)]}
    summary = edit_memory.summary(run)
    assert (summary["trainings"], summary["training_s_total"]) == (None, None)
    assert summary["segments_max"] == 2


def test_a_run_of_a_bench_that_recorded_none_still_sums_up():
    run = {"idle_mb": 318, "rounds": [{"rss_mb": 346, "index_s": 2.0, "search_ms": [30.0]}]}
    summary = edit_memory.summary(run)
    assert (summary["trainings"], summary["segments_max"], summary["index_mb_at_start"],
            summary["index_mb_without_training"], summary["full_gc_ms_max"]) == (
                None, None, None, None, None)


def test_the_days_settings_reach_the_measured_process_as_asked(tmp_path, monkeypatch):
    (tmp_path / "work" / "ws").mkdir(parents=True)
    passed = {}
    monkeypatch.setattr(edit_memory, "run_child",
                        lambda script, code, child_args, cwd, timeout:
                        passed.setdefault("args", child_args) and {})
    args = argparse.Namespace(rounds=24, files=3, searches=10, seed=7, pull_every=6,
                              pull_files=127, pause=65.0)
    edit_memory.measure(tmp_path, tmp_path / "work", args)
    got = {}
    monkeypatch.setattr(edit_memory, "child",
                        lambda work, *values: got.setdefault("values", values))
    monkeypatch.setattr(sys, "argv", ["edit_memory.py", "--child", *passed["args"]])
    assert edit_memory.main() == 0
    names = ["rounds", "files", "searches", "seed", "pull_every", "pull_files", "pause"]
    assert dict(zip(names, got["values"], strict=True)) == vars(args)


@pytest.mark.parametrize("asked", [["--pull-every", "-1"], ["--pause", "-1"],
                                   ["--pull-files", "0"], ["--rounds", "0"],
                                   ["--searches", "-1"]])
def test_counts_that_make_no_day_are_refused_before_anything_runs(tmp_path, asked):
    done = subprocess.run([sys.executable, str(Path(edit_memory.__file__)), "--workdir",
                           str(tmp_path), *asked], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "take 1 or more; --pull-every, --pause and --searches 0 or more" in done.stderr
