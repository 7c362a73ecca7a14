"""Which of a phase's searches ran beside one of the server's compactions.

The server logs each compaction when it ends, with how long it took (``index compacted in N
ms``; during a run ``... while indexing``, since 2026-12-06; with the ANN index's training,
``(of which the vector index's training and the rewrite after it: M ms)``). A run's
compaction folds the rows its last batches wrote into the indexes, so searches in the
seconds before it read those rows outside them. :class:`TimedLog` notes when each log
message arrived; :func:`compaction_spans` turns the messages into (start, end) wall-clock
spans; :func:`beside_compactions` splits a phase's searches into those that overlapped a span
(or the writes just before one) and the others.
"""

from __future__ import annotations

import re
import time

from bench_basics import pct

COMPACTED = re.compile(r"index compacted in (\d+) ms"
                       r"(?: \(of which the vector index's training and the rewrite after "
                       r"it: (\d+) ms\))?")
# A run writes what a compaction folds just before it: past 50k chunks, a batch's groups in
# well under a second each (sixty-ninth session's step logs), searched unindexed meanwhile.
WRITES_BEFORE_SECONDS = 2.0


class TimedLog(list):
    """pytest-lsp's ``client.log_messages``, with the wall-clock time each one arrived
    (pytest-lsp only ever appends; any other change would put ``arrived`` out of step, so
    it raises)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: list[float] = []

    def append(self, message) -> None:  # noqa: ANN001 - a LogMessageParams
        self.arrived.append(time.time())
        super().append(message)

    def _unsupported(self, *args, **kwargs):  # noqa: ANN002, ANN003
        raise TypeError("a TimedLog is only appended to")

    extend = insert = remove = pop = clear = sort = reverse = _unsupported
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _unsupported


def compaction_spans(messages: TimedLog, since: float = 0.0) -> list[dict]:
    """Each compaction logged after ``since``: its wall-clock start and end, and how long the
    training in it took (0 when none ran)."""
    spans = []
    for message, arrived in zip(messages, messages.arrived, strict=True):
        found = COMPACTED.search(message.message)
        if found and arrived >= since:
            spans.append({"start": arrived - int(found.group(1)) / 1000, "end": arrived,
                          "training_s": int(found.group(2) or 0) / 1000})
    return spans


def beside_compactions(searches: list[tuple[float, float]], spans: list[dict]) -> dict:
    """``searches``: (wall-clock start, milliseconds) of each. How many ran beside a
    compaction (or in the WRITES_BEFORE_SECONDS before one), the others' p95, and how many of
    the slowest 5 % ran beside one."""
    def beside(start: float, ms: float) -> bool:
        end = start + ms / 1000
        return any(span["start"] - WRITES_BEFORE_SECONDS < end and start < span["end"]
                   for span in spans)

    flags = [beside(start, ms) for start, ms in searches]
    others = [ms for (_, ms), near in zip(searches, flags, strict=True) if not near]
    slowest = sorted(range(len(searches)), key=lambda i: -searches[i][1])
    slowest = slowest[:max(1, len(searches) // 20)] if searches else []
    return {"compactions": len(spans),
            "seconds": round(sum(span["end"] - span["start"] for span in spans), 1),
            "trainings": sum(1 for span in spans if span["training_s"]),
            "searches_beside": sum(flags),
            "others_p95_ms": round(pct(others, 0.95), 1) if others else None,
            "slowest_5pct": len(slowest),
            "slowest_5pct_beside": sum(1 for i in slowest if flags[i])}


def timeline(searches: list[tuple[float, float]], timings: list[dict], spans: list[dict],
             start: float, parts: tuple[str, ...]) -> dict:
    """A phase's searches and compactions in order, in seconds since ``start`` (the phase's
    start): each search as [when, round trip ms, then each of ``parts`` of its ``timings``
    in ms (None where the server gave none: an older checkout)], each compaction as [start,
    end]. ``timings``: one per search, in the same order. To see where in a run the slow
    searches fall, not only how many lie beside a compaction."""
    rows = []
    for (wall, ms), told in zip(searches, timings, strict=True):
        rows.append([round(wall - start, 2), round(ms, 1), *(told.get(part) for part in parts)])
    return {"columns": ["seconds", "roundTripMs", *parts], "searches": rows,
            "compactions": [[round(span["start"] - start, 2), round(span["end"] - start, 2)]
                            for span in spans]}
