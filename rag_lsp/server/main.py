"""Start-up: build the server with every feature registered, and serve it on stdio."""

from __future__ import annotations

import logging
import sys

from lsprotocol import types

from rag_lsp.server.app import RagServer
from rag_lsp.server.features import context, indexing, knowledge, lifecycle, search, watching
from rag_lsp.server.framing import FrameGuard
from rag_lsp.server.jsonrpc import LockedWire, encode_frame
from rag_lsp.server.stdio import ClientLogHandler, claim_stdout, configure_logging, unsent


def build_server() -> RagServer:
    server = RagServer()
    for feature in (lifecycle, indexing, watching, search, knowledge, context):
        feature.register(server)
    return server


def serve_stdio(log_level: str = "info") -> None:
    """Serve JSON-RPC on stdin/stdout until the client exits."""
    wire = claim_stdout()
    stderr = configure_logging(log_level)
    server = build_server()
    out = LockedWire(wire)

    def to_client(kind: types.MessageType, message: str, record: logging.LogRecord) -> bool:
        """Queue ``message`` for the client; False if it cannot go (then stderr has it)."""
        def send() -> None:
            if out.closed:  # the session ended while it waited: keep it on stderr
                stderr.handle(unsent(record))
                return
            server.window_log_message(types.LogMessageParams(type=kind, message=message))

        return not out.closed and server.post(send)

    logging.getLogger("rag_lsp").addHandler(ClientLogHandler(to_client))
    stdin = FrameGuard(sys.stdin.buffer, lambda error: out.write(encode_frame(error)))
    try:
        server.start_io(stdin=stdin, stdout=out)
    finally:  # also when the client vanished without `shutdown`: stop indexing, then exit
        server.stop()
