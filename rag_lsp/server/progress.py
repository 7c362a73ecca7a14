"""Work-done progress the editor already knows how to show (``$/progress``), for one run."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING

from lsprotocol import types

from rag_lsp.indexing.progress import IndexProgress

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState

log = logging.getLogger(__name__)

REPORT_EVERY_SECONDS = 0.2  # enough for a smooth bar without flooding the client


class WorkDone:
    """``begin`` → ``report``… → ``end`` for one token; a client's cancel sets ``cancel``."""

    def __init__(self, server: ServerState, title: str, cancel: threading.Event):
        self._server = server
        self._title = title
        self._cancel = cancel
        self._token = f"rag-lsp/{uuid.uuid4()}"
        self._active = False
        self._last_report = 0.0

    async def begin(self, message: str) -> None:
        caps = self._server.client_capabilities
        if not (caps.window and caps.window.work_done_progress):
            return
        try:
            await self._server.work_done_progress.create_async(self._token)
        except Exception as exc:  # a client may refuse; the index status still reports
            log.info("client refused a progress token: %s", exc)
            return
        self._active = True
        self._server.work_done_progress.begin(
            self._token,
            types.WorkDoneProgressBegin(
                title=self._title, message=message, cancellable=True, percentage=0
            ),
        )
        token_future = self._server.work_done_progress.tokens.get(self._token)
        if token_future is not None:
            token_future.add_done_callback(lambda _f: self._cancel.set())

    def report(self, progress: IndexProgress) -> bool:
        """Report ``progress`` unless one was sent very recently; True if this one is due
        (the caller may then send its own status too, at the same pace)."""
        now = time.monotonic()
        if now - self._last_report < REPORT_EVERY_SECONDS:
            return False
        self._last_report = now
        if not self._active:
            return True
        self._server.work_done_progress.report(
            self._token,
            types.WorkDoneProgressReport(
                message=progress.describe(), percentage=progress.percentage(), cancellable=True
            ),
        )
        return True

    def end(self, message: str) -> None:
        if not self._active:
            return
        self._active = False
        self._server.work_done_progress.end(
            self._token, types.WorkDoneProgressEnd(message=message)
        )
        self._server.work_done_progress.tokens.pop(self._token, None)

