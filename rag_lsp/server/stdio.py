"""Logging beside the wire (stderr and the client's log) and the protocol's own rules.

stdout itself is claimed for JSON-RPC before anything else (``jsonrpc.claim_stdout``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
)
from pygls.protocol.language_server import lsp_method

from rag_lsp.server.errors import RagRequestError

log = logging.getLogger(__name__)


_LEVELS = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


# Set on a record the client handler has passed on; the stderr handler skips such records.
_SENT = "rag_lsp_sent_to_client"


class ClientLogHandler(logging.Handler):
    """Forwards rag-lsp's log records to the client's log (``window/logMessage``).

    A record handed on is marked, and :class:`NotSentToClient` keeps it off stderr:
    vscode-languageclient shows the server's stderr in the same output channel as its log
    messages, so every line appeared twice. ``send`` returns False when it cannot send
    (the event loop is not running yet, or the session is over); the record then stays on
    stderr. pygls's own records are not forwarded: sending a message logs, which would loop.
    """

    def __init__(self, send: Callable[[types.MessageType, str, logging.LogRecord], bool]):
        super().__init__(logging.INFO)
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("rag_lsp"):
            return
        try:
            kind = next(v for k, v in _LEVELS.items() if record.levelno >= k)
            if self._send(kind, self.format(record), record):
                setattr(record, _SENT, True)
        except Exception:  # never let logging take the server down
            self.handleError(record)


class NotSentToClient(logging.Filter):
    """On the stderr handler: records the client already has are not written again."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, _SENT, False)


def unsent(record: logging.LogRecord) -> logging.LogRecord:
    """``record`` as not sent after all (the session ended before it went out)."""
    setattr(record, _SENT, False)
    return record


def configure_logging(level: str) -> logging.Handler:
    """Everything to stderr, except what the client handler (added once the server exists)
    sends to the client. Returns the stderr handler."""
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    stderr.addFilter(NotSentToClient())
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[stderr])
    # pygls logs every message at debug/info; keep its chatter out unless asked for.
    if level.upper() != "DEBUG":
        logging.getLogger("pygls").setLevel(logging.WARNING)
    logging.getLogger("pygls.protocol.json_rpc").addFilter(AnsweredRequestErrors())
    return stderr


class AnsweredRequestErrors(logging.Filter):
    """pygls logs every error a request ends with at ERROR, with a traceback, and an editor
    shows it as if the server had failed. Every request error of ours is a RagRequestError
    (``server/errors.py``): the client gets its message, and an unexpected one has already
    been logged with its traceback by ``rag_request``. pygls's copy of those is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, RagRequestError)


class RagProtocol(LanguageServerProtocol):
    """JSON-RPC allows a request or notification without ``params``; pygls's fallback message
    types require the field, and would drop such a message without any reply.

    A method of ours (no LSP type: ``rag/search`` and the rest) keeps its params as parsed
    JSON: pygls's fallback turned every object in them into a new named-tuple class, which
    each handler's ``parse_params`` turned back into dicts (a ``type_name`` key left the
    request unanswered, and keys that are not Python names were renamed); now the schema
    judges the keys as sent. An answer that is a dict or list (all of ours are) is
    handed to ``json.dumps`` as it is, without cattrs' walk through every value first; an
    lsprotocol object inside it still goes through cattrs, as ``json.dumps``'s ``default``.
    The two saved 0.2-0.3 ms a search at the median (bench/README.md,
    "`protocol_overhead.py`: the server's own share of a request")."""

    # Editor buffers are not followed (a save is: didSave), so their text is not kept.
    # pygls kept a copy of every open buffer (an editor with a few large files open held
    # tens of MB more) and applied each change to it, logging an error for a change to a
    # buffer it had not seen opened and for every incremental change (this server asks
    # for none: TextDocumentSyncKind.None_).
    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        return None

    # Set when `initialize` was answered before pygls loaded (``early_answer``): told when
    # pygls cannot read that message, which it then never answers.
    on_unreadable_initialize: Callable[[str], None] | None = None

    def structure_message(self, data: dict[str, Any]):
        if isinstance(data, dict) and "method" in data and "params" not in data:
            data = {**data, "params": None}
        # (json.loads calls this for every object, innermost first: a message is one with
        # "jsonrpc". The frame guard has checked its fields' types: check_message.)
        if ("jsonrpc" in data and "method" in data and "error" not in data
                and self.get_message_type(data["method"]) is None):
            if "id" in data:
                return JsonRPCRequestMessage(id=data["id"], method=data["method"],
                                             jsonrpc=data["jsonrpc"], params=data["params"])
            return JsonRPCNotification(method=data["method"], jsonrpc=data["jsonrpc"],
                                       params=data["params"])
        try:
            return super().structure_message(data)
        except JsonRpcInvalidParams as error:
            told = self.on_unreadable_initialize
            if told is not None and isinstance(data, dict) and data.get("method") == "initialize":
                told(_problems(error))
            raise

    def _serialize_message(self, data: Any) -> Any:
        if type(data) is JsonRPCResponseMessage and isinstance(data.result, dict | list):
            return {"id": data.id, "jsonrpc": data.jsonrpc, "result": data.result}
        return super()._serialize_message(data)

    def handle_message(self, message: Any) -> None:
        # After `shutdown` only `exit` is served. What the client still sends meanwhile (a
        # file event, a cancel, the answer to one of our requests) is ignored, as pygls
        # does, but quietly: pygls warned about each, and a restart looked like a failure.
        if self._shutdown and getattr(message, "method", "") != types.EXIT:
            if hasattr(message, "method") and getattr(message, "id", None) is not None:
                # A request still gets an answer, as the spec asks: a client awaits it.
                self._send_response(message.id, error=JsonRpcInvalidRequest(
                    f"the server is shutting down: {message.method} is not served after "
                    "`shutdown`; send `exit`").to_response_error())
                return
            log.debug("after shutdown, ignored: %s", getattr(message, "method", "a response"))
            return
        if self._answers_a_cancelled_request(message):
            log.debug("answer to request %s, no longer awaited, dropped", message.id)
            return
        super().handle_message(message)

    def _answers_a_cancelled_request(self, message: Any) -> bool:
        """An answer to one of our requests whose caller was cancelled (its folder closed
        while it awaited a progress token). pygls would set it on the cancelled future and
        report the InvalidStateError ("CANCELLED: <Future …>") as "Error in server"."""
        if hasattr(message, "method") or not hasattr(message, "id"):
            return False  # a request or notification from the client
        future = self._request_futures.get(message.id)
        if future is None or not future.cancelled():
            return False
        del self._request_futures[message.id]
        return True


def _problems(error: Exception) -> str:
    """What lsprotocol could not read in a message, by JSON path where cattrs says."""
    cause = error.__cause__
    if isinstance(cause, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(cause, path="$"))
    return str(cause or error)
