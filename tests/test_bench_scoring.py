"""The code-retrieval benchmark's scorer (bench/codebench), checked by hand-worked figures.

The benchmark itself needs third-party sources and is not run in CI; its scoring rules are.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from codebench.data import Target, Task, infer_category, parse_target  # noqa: E402
from codebench.scoring import (  # noqa: E402
    RankedFile,
    existing_targets,
    macro,
    ndcg,
    path_matches,
    score_query,
    summarise,
)


def task(*targets: str, category: str = "semantic") -> Task:
    return Task("repo", "python", "q", category, tuple(parse_target(t) for t in targets))


def test_paths_match_as_suffixes_at_a_slash():
    assert path_matches("src/aiohttp/client.py", "aiohttp/client.py")
    assert path_matches("aiohttp/client.py", "src/aiohttp/client.py")
    assert not path_matches("src/aiohttp/myclient.py", "client.py")
    assert path_matches("a\\b.py", "a/b.py")


def test_targets_parse_with_and_without_spans():
    assert parse_target("a/b.py:10-20") == Target("a/b.py", 10, 20)
    assert parse_target("a/b.py") == Target("a/b.py")
    assert parse_target({"path": "x.go", "start_line": 3, "end_line": 4}) == Target("x.go", 3, 4)
    assert infer_category("Depends") == "symbol"
    assert infer_category("how does routing work") == "architecture"
    assert infer_category("where are cookies parsed") == "semantic"


def test_ndcg_is_binary_gain_over_the_existing_targets():
    assert ndcg([1], 1) == 1.0
    assert ndcg([2], 1) == pytest.approx(1 / math.log2(3))
    # Two targets, found at 1 and 3: (1 + 1/log2(4)) / (1 + 1/log2(3)).
    assert ndcg([1, 3], 2) == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    assert ndcg([11], 1) == 0.0  # beyond k
    assert ndcg([1, 1], 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))  # one rank counts once
    assert ndcg([], 0) == 0.0


def test_a_span_target_needs_an_overlapping_range():
    query = task("pkg/mod.py:10-20", "pkg/other.py")
    shown = [RankedFile("pkg/mod.py", ((30, 40),)), RankedFile("pkg/other.py", ((1, 5),)),
             RankedFile("pkg/mod.py", ((18, 25),))]
    score = score_query(query, shown, n_existing=2)
    assert score.ranks == [3, 2]
    assert score.hit1 == 0.0 and score.rr == 0.5
    # File-only results (a ripgrep baseline) are scored by path, as Semble does.
    assert score_query(query, [RankedFile("pkg/mod.py")], n_existing=2).ranks == [1, None]


def test_only_targets_in_the_indexed_tree_count_towards_the_ideal():
    targets = [Target("a.py"), Target("gone.py")]
    assert existing_targets(targets, ["src/a.py", "src/b.py"]) == 1
    score = score_query(task("a.py", "gone.py"), [RankedFile("src/a.py")], n_existing=1)
    assert score.ndcg10 == 1.0


def test_headline_and_categories_are_means_over_repositories():
    repo_a = summarise([score_query(task("x.py", category="symbol"), [RankedFile("x.py")], 1),
                        score_query(task("y.py"), [], 1)])
    repo_b = summarise([score_query(task("z.py", category="symbol"), [], 1)])
    assert repo_a.ndcg10 == 0.5 and repo_a.by_category == {"symbol": 1.0, "semantic": 0.0}
    overall = macro({"a": repo_a, "b": repo_b})
    assert overall.ndcg10 == pytest.approx(0.25)  # (0.5 + 0.0) / 2, not 1/3 over queries
    assert overall.by_category == {"symbol": 0.5, "semantic": 0.0}
    assert overall.queries == 3
