"""bench/search_while_indexing.py tells the searches beside a compaction apart."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from search_while_indexing import overlaps  # noqa: E402


def test_a_search_is_beside_a_compaction_when_their_times_overlap():
    spans = [[10.0, 12.0], [20.0, 21.0]]
    assert overlaps(10.5, 11.0, spans)  # within
    assert overlaps(9.0, 10.5, spans) and overlaps(11.5, 13.0, spans)  # across either end
    assert overlaps(19.0, 22.0, spans)  # around
    assert not overlaps(12.5, 13.0, spans) and not overlaps(8.0, 9.9, spans)
    assert not overlaps(21.5, 30.0, spans) and not overlaps(1.0, 2.0, [])
    # touching at an end is not overlapping
    assert not overlaps(12.0, 13.0, spans) and not overlaps(9.0, 10.0, spans)


def test_a_compaction_still_running_overlaps_what_came_after_its_start():
    assert overlaps(31.0, 31.2, [[30.0, 0.0]])
    assert not overlaps(29.0, 29.5, [[30.0, 0.0]])
