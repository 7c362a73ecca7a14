"""bench/edit_memory.py over a day of work: each round records the compactions it ran (and
of those the ANN index's trainings), the index's segments after them and its folder's size;
the summary counts them, and still summarises a run of a checkout that recorded none. The
cyclic garbage collector's full collections are timed, and only those. Counts that make no
day (a pull every -1 rounds) are refused before anything runs."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import edit_memory  # noqa: E402

from rag_lsp.store import vector_index  # noqa: E402
from rag_lsp.store.compaction_times import CompactionTimes  # noqa: E402
from rag_lsp.store.lance_store import ChunkStore  # noqa: E402


def test_each_compaction_is_recorded_with_the_segments_it_left(monkeypatch):
    results = iter([CompactionTimes(0.7), CompactionTimes(9.2, 8.4)])
    monkeypatch.setattr(ChunkStore, "optimize",
                        lambda store, *args, **kwargs: next(results))
    monkeypatch.setattr(vector_index, "index_segments", lambda table: table.segments)
    seen = edit_memory.recording_compactions()
    store = SimpleNamespace(_chunks=SimpleNamespace(segments=3))
    assert ChunkStore.optimize(store) == CompactionTimes(0.7)  # what the store returned
    store._chunks.segments = 1
    ChunkStore.optimize(store, max_segments=1)
    assert seen == [(CompactionTimes(0.7), 3), (CompactionTimes(9.2, 8.4), 1)]


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
    assert edit_memory.folder_mb(tmp_path) == 1.5


def _round(rss: int, training: list[float], segments: int | None, index_mb: int) -> dict:
    return {"rss_mb": rss, "index_s": 2.0, "search_ms": [30.0, 40.0],
            "compactions_s": [t + 1 for t in training] or [0.5], "training_s": training,
            "segments": segments, "index_mb": index_mb, "full_gc_ms": [1.5] * len(training)}


def test_the_summary_counts_trainings_segments_and_the_folder_first_and_last():
    run = {"idle_mb": 318, "index_mb": 291,
           "rounds": [_round(346, [8.4], 1, 540), _round(349, [], 2, 560),
                      _round(351, [8.0], 1, 600), _round(350, [], 4, 610)]}
    summary = edit_memory.summary(run)
    assert summary["trainings"] == 2
    assert summary["training_s_total"] == 16.4
    assert summary["segments_max"] == 4
    assert summary["index_mb"] == [291, 610]
    assert summary["max_mb"] == 351
    assert summary["full_gc_ms_max"] == 1.5


def test_a_run_of_a_checkout_that_recorded_none_still_sums_up():
    run = {"idle_mb": 318, "rounds": [{"rss_mb": 346, "index_s": 2.0, "search_ms": [30.0]}]}
    summary = edit_memory.summary(run)
    assert (summary["trainings"], summary["segments_max"], summary["index_mb"],
            summary["full_gc_ms_max"]) == (0, 0, [None, None], None)


def test_counts_that_make_no_day_are_refused_before_anything_runs(tmp_path):
    done = subprocess.run([sys.executable, str(Path(edit_memory.__file__)), "--workdir",
                           str(tmp_path), "--pull-every", "-1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--pull-every and --pause 0 or more" in done.stderr
