"""Background tasks the server starts and does not await: held until done, errors logged.

asyncio keeps only a weak reference to a task; one nobody holds can be collected mid-run, and
its exception would vanish unseen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

_running: set[asyncio.Task] = set()


def spawn(coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
    task = asyncio.ensure_future(coroutine)
    _running.add(task)
    task.add_done_callback(_finished)
    return task


def _finished(task: asyncio.Task) -> None:
    _running.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("background task failed", exc_info=task.exception())
