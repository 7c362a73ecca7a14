"""bench/server_latency.py reports each search phase part by part, from the server's own
``timings``, and nothing for a server too old to give them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from server_latency import PARTS, parts_stats  # noqa: E402


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
