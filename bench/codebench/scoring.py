"""Scoring exactly as Semble's code-retrieval benchmark does, at file level.

For each query, each target (relevant and secondary, equal weight) gets the 1-based rank of
the first result whose path matches it (one path a suffix of the other at a ``/``); a target
with a line span also needs a result range that overlaps it. Gains are binary; the ideal DCG
is over min(10, number of targets that exist in the indexed tree). A repository's figure is
the mean over its queries, the headline the mean over repositories, and a category's figure
the mean over repositories of each repository's mean for that category.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from codebench.data import CATEGORIES, Target, Task

K = 10


@dataclass(frozen=True)
class RankedFile:
    """One result as the scorer sees it: a path and the line ranges shown for it."""

    path: str
    ranges: tuple[tuple[int, int], ...] = ()


def path_matches(result_path: str, target_path: str) -> bool:
    a, b = result_path.replace("\\", "/"), target_path.replace("\\", "/")
    return a == b or a.endswith(f"/{b}") or b.endswith(f"/{a}")


def matches(result: RankedFile, target: Target) -> bool:
    """Path match; a target with a span also needs an overlapping range, unless the result
    has no ranges at all (a file-only baseline such as ripgrep, scored by path as Semble does)."""
    if not path_matches(result.path, target.path):
        return False
    if not target.has_span or not result.ranges:
        return True
    return any(not (end < target.start_line or start > target.end_line)
               for start, end in result.ranges)


def target_rank(results: Sequence[RankedFile], target: Target) -> int | None:
    for rank, result in enumerate(results, start=1):
        if matches(result, target):
            return rank
    return None


def dcg(gains: Sequence[int]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg(ranks: Iterable[int], n_targets: int, k: int = K) -> float:
    """Binary-gain NDCG@k from the ranks of found targets (two targets on one rank count once)."""
    if n_targets == 0:
        return 0.0
    gains = [0] * k
    for rank in ranks:
        if 1 <= rank <= k:
            gains[rank - 1] = 1
    return dcg(gains) / dcg([1] * min(k, n_targets))


def existing_targets(targets: Iterable[Target], indexed_paths: Iterable[str]) -> int:
    """How many targets name a file that is in the indexed tree."""
    paths = list(indexed_paths)
    return sum(any(path_matches(p, t.path) for p in paths) for t in targets)


@dataclass
class QueryScore:
    task: Task
    ndcg10: float
    hit1: float  # the first result answers
    rr: float  # reciprocal rank of the first answering result (0 beyond k)
    ranks: list[int | None]
    top: list[str]
    ms: float = 0.0
    first_range_hit: bool | None = None  # only for targets with spans, else None


def score_query(task: Task, results: Sequence[RankedFile], n_existing: int,
                ms: float = 0.0) -> QueryScore:
    results = list(results)[:K]
    ranks = [target_rank(results, t) for t in task.targets]
    found = [r for r in ranks if r is not None]
    first = min(found) if found else None
    return QueryScore(task, ndcg(found, n_existing), 1.0 if first == 1 else 0.0,
                      1.0 / first if first else 0.0, ranks, [r.path for r in results], ms)


@dataclass
class Summary:
    """Figures for one group of queries (a repository)."""

    ndcg10: float
    hit1: float
    mrr: float
    by_category: dict[str, float] = field(default_factory=dict)
    queries: int = 0


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def summarise(scores: Sequence[QueryScore]) -> Summary:
    by_category = {}
    for category in CATEGORIES:
        picked = [s.ndcg10 for s in scores if s.task.category == category]
        if picked:
            by_category[category] = mean(picked)
    return Summary(mean(s.ndcg10 for s in scores), mean(s.hit1 for s in scores),
                   mean(s.rr for s in scores), by_category, len(scores))


def macro(summaries: dict[str, Summary]) -> Summary:
    """Mean over repositories; a category's figure over the repositories that have it."""
    by_category = {}
    for category in CATEGORIES:
        picked = [s.by_category[category] for s in summaries.values()
                  if category in s.by_category]
        if picked:
            by_category[category] = mean(picked)
    values = list(summaries.values())
    return Summary(mean(s.ndcg10 for s in values), mean(s.hit1 for s in values),
                   mean(s.mrr for s in values), by_category, sum(s.queries for s in values))


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[index]
