"""Asking for a compaction of a folder's index once a burst of file-event updates has settled.

Each update leaves a fragment that searches past 50k chunks read unindexed, and a compaction
rewrites the whole chunks table (+80 MB at 23.7k chunks). So: ask once updates have settled,
or after a number of them, or when the oldest has waited long enough; the workspace then
compacts only if one is due (``ChunkStore.needs_optimize`` says when).
"""

from __future__ import annotations

import asyncio
import logging

from rag_lsp.server.folders import FolderIndex

log = logging.getLogger(__name__)

COMPACT_AFTER_SECONDS = 20.0
COMPACT_EVERY_UPDATES = 20
COMPACT_AT_LATEST_SECONDS = 30.0

def schedule_compact(folder: FolderIndex) -> None:
    jobs = folder.jobs
    now = asyncio.get_running_loop().time()
    if not jobs.first_uncompacted_at:
        jobs.first_uncompacted_at = now
    waited = now - jobs.first_uncompacted_at
    delay = min(COMPACT_AFTER_SECONDS, max(0.0, COMPACT_AT_LATEST_SECONDS - waited))
    if jobs.updates_since_compact >= COMPACT_EVERY_UPDATES:
        delay = 0.0
    jobs.after("compact", delay, lambda: compact(folder))


async def compact(folder: FolderIndex) -> None:
    jobs = folder.jobs
    if folder.closed or jobs.running:
        return  # a run compacts at its end if due
    jobs.updates_since_compact = 0
    jobs.first_uncompacted_at = 0.0

    try:
        times = await jobs.write(folder.workspace.compact)
    except Exception as exc:  # compaction is an optimisation; never fatal
        log.warning("%s: compaction failed: %s", folder.name, exc)
        return
    if times is not None:  # (updates waited meanwhile: the log says for how long)
        log.info("%s: %s", folder.name, times.describe())
