"""Start-up: build the server with every feature registered, and serve it on stdio."""

from __future__ import annotations

import logging

from lsprotocol import types

from rag_lsp.server.app import RagServer
from rag_lsp.server.early_answer import Opening, open_stdio
from rag_lsp.server.features import context, indexing, knowledge, lifecycle, search, watching
from rag_lsp.server.serving import serve_io
from rag_lsp.server.stdio import ClientLogHandler, configure_logging, unsent


def build_server() -> RagServer:
    server = RagServer()
    for feature in (lifecycle, indexing, watching, search, knowledge, context):
        feature.register(server)
    return server


def serve_stdio(log_level: str = "info", opening: Opening | None = None) -> None:
    """Serve JSON-RPC on stdin/stdout until the client exits. ``opening``: stdio as
    :func:`open_stdio` left it (``rag-lsp serve`` calls it before this module loads, so that
    `initialize` is answered before pygls is imported)."""
    opening = opening or open_stdio()
    stderr = configure_logging(log_level)
    server = build_server()
    out = opening.wire
    if opening.answered_early:
        server.protocol.on_unreadable_initialize = opening.stdout.unreadable

    def to_client(kind: types.MessageType, message: str, record: logging.LogRecord) -> bool:
        """Queue ``message`` for the client; False if it cannot go (then stderr has it)."""
        def send() -> None:
            if out.closed:  # the session ended while it waited: keep it on stderr
                stderr.handle(unsent(record))
                return
            server.window_log_message(types.LogMessageParams(type=kind, message=message))

        return not out.closed and server.post(send)

    logging.getLogger("rag_lsp").addHandler(ClientLogHandler(to_client))
    try:
        serve_io(server, opening.stdin, opening.stdout)
    finally:  # also when the client vanished without `shutdown`: stop indexing, then exit
        server.stop()
