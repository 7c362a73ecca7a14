"""pygls's message loop on stdio, read through the frame guard with one hand-over a message.

pygls's own ``start_io`` reads each message in three calls (the header line, the blank line,
the body), each handed to a thread and back to the event loop: six thread wake-ups before a
request is dispatched, each waiting its turn for a core while a run indexes. The guard
(``framing.FrameGuard``) reads a whole frame on the first call, so :class:`FrameReader` hands
only that one to a thread; the rest of the frame is already in memory and is answered on the
loop at once (bench/README.md, "`protocol_overhead.py`: the server's own share of a request").
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable
from concurrent.futures import Executor
from typing import Any

from pygls.io_ import StdoutWriter, run_async

from rag_lsp.server.framing import FrameGuard

# pygls's own loop logs under this name (``pygls.server``, which its start_io uses).
_PYGLS_LOG = logging.getLogger("pygls.server")


class FrameReader:
    """The reader pygls's loop awaits (``readline``, ``readexactly``), over a guard."""

    def __init__(self, guard: FrameGuard, executor: Executor):
        self._guard = guard
        self._executor = executor

    def readline(self) -> Awaitable[bytes]:
        if self._guard.buffered():
            return _done(self._guard.readline())
        return asyncio.get_running_loop().run_in_executor(self._executor, self._guard.readline)

    def readexactly(self, n: int) -> Awaitable[bytes]:
        # pygls reads a body after its header, and the guard holds a frame whole: a shorter
        # read would be taken by pygls's loop for the end of input.
        if self._guard.buffered() < n:
            raise RuntimeError(f"a body of {n} bytes asked for with "
                               f"{self._guard.buffered()} read: frames are read whole")
        return _done(self._guard.read(n))


def _done(value: bytes) -> asyncio.Future[bytes]:
    """An awaitable that has ``value`` already: awaiting it does not leave the loop's turn."""
    future = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


def serve_io(server: Any, stdin: FrameGuard, stdout: Any) -> None:
    """What pygls's ``start_io`` does (a pygls ``JsonRPCServer``), reading through
    :class:`FrameReader`: serve until the client exits or stdin closes."""
    # pygls's loop runs until this is set or stdin ends (`exit` leaves by SystemExit); its
    # shutdown() sets it.
    server._stop_event = stop = threading.Event()  # noqa: SLF001
    server.protocol.set_writer(StdoutWriter(stdout))
    try:
        asyncio.run(run_async(stop_event=stop, reader=FrameReader(stdin, server.thread_pool),
                              protocol=server.protocol, logger=_PYGLS_LOG,
                              error_handler=server.report_server_error))
    except BrokenPipeError:
        _PYGLS_LOG.error("Connection to the client is lost! Shutting down the server.")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
