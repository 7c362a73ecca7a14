"""The server logs each compaction it asks for once saves settle, with how long it took and
how long the ANN index's training in it took: the heaviest step a save sets off, so a user
who sees the CPU busy (or a bench timing searches) can tell when it ran."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

from rag_lsp.server.features.compaction import compact
from rag_lsp.store.compaction_times import CompactionTimes


class _Jobs:
    running = False
    updates_since_compact = 3
    first_uncompacted_at = 1.0

    async def write(self, function, *args, **kwargs):
        return function(*args, **kwargs)


def _folder(result):
    return SimpleNamespace(name="ws", closed=False, jobs=_Jobs(),
                           workspace=SimpleNamespace(compact=lambda: result))


def test_a_compaction_is_logged_with_its_training(caplog):
    caplog.set_level(logging.INFO, logger="rag_lsp.server.features.compaction")
    folder = _folder(CompactionTimes(7.7, 6.31))
    asyncio.run(compact(folder))
    assert caplog.messages == [
        "ws: index compacted in 7700 ms (of which the vector index's training and the rewrite"
        " after it: 6310 ms)"]
    assert folder.jobs.updates_since_compact == 0


def test_a_compaction_without_a_training_is_logged_with_its_time_alone(caplog):
    caplog.set_level(logging.INFO, logger="rag_lsp.server.features.compaction")
    asyncio.run(compact(_folder(CompactionTimes(0.42))))
    assert caplog.messages == ["ws: index compacted in 420 ms"]


def test_nothing_is_logged_when_no_compaction_was_due(caplog):
    caplog.set_level(logging.INFO, logger="rag_lsp.server.features.compaction")
    asyncio.run(compact(_folder(None)))
    assert caplog.messages == []
