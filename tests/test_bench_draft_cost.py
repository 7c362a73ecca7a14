"""bench/draft_cost.py: what the draft costs is the searches with it less those without, at
each quantile; counts that make no measurement (or an odd number of blocks, or more queries
than the embedder keeps vectors of), and a folder that is no workdir, are refused before any
process runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import draft_cost  # noqa: E402


def test_the_draft_s_cost_is_the_searches_with_it_less_those_without():
    got = {"drafted_files": 150,
           "ms": {"drafted": [float(ms) for ms in range(10, 30)],
                  "none": [float(ms) for ms in range(5, 25)]},
           "parts": {"drafted": {"query_embedding_ms": [0.0] * 20, "vector_ms": [2.0] * 20},
                     "none": {"query_embedding_ms": [0.0] * 20, "vector_ms": [1.5] * 20}}}
    figures = draft_cost.summary(got)
    assert figures["draft_costs"] == {"p50": 5.0, "p95": 5.0}
    assert figures["search"]["drafted"]["p50"] - figures["search"]["none"]["p50"] == 5.0
    # the query's embedding is cached in both states: not a part worth showing
    assert figures["parts_p50"] == {"drafted": {"vector": 2.0}, "none": {"vector": 1.5}}
    assert figures["drafted_files"] == 150


@pytest.mark.parametrize("extra", [["--files", "0"], ["--rounds", "0"], ["--queries", "10"],
                                   ["--queries", "75"], ["--queries", "500"]])
def test_counts_that_measure_nothing_are_refused_before_any_process_runs(
        tmp_path, monkeypatch, extra):
    (tmp_path / "ws").mkdir()
    (tmp_path / "index" / "ws-0").mkdir(parents=True)
    (tmp_path / "index" / "ws-0" / "manifest.json").write_text("{}")
    monkeypatch.setattr(draft_cost, "run_child", lambda *a: pytest.fail("a process ran"))
    monkeypatch.setattr(sys, "argv", ["draft_cost.py", "--workdir", str(tmp_path), *extra])
    with pytest.raises(SystemExit, match="must be"):
        draft_cost.main()


def test_a_folder_that_is_no_workdir_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(draft_cost, "run_child", lambda *a: pytest.fail("a process ran"))
    monkeypatch.setattr(sys, "argv", ["draft_cost.py", "--workdir", str(tmp_path)])
    with pytest.raises(SystemExit, match="no ws/ and index/"):
        draft_cost.main()
