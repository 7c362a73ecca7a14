"""`initialize` answered before pygls loads.

pygls can answer nothing before ``lsprotocol.types`` is imported: about a thousand attrs
classes, 0.25–0.5 s on a 2-core machine, most of `rag-lsp serve`'s start. The answer to
`initialize` needs none of it: the server's capabilities follow from the features it
registers, and the parts that follow the client's (the position encoding, and whether the
will-save fields are stated) follow pygls's rules, mirrored in :func:`client_dependent`.

So when the first message is an `initialize` whose params have the shape the protocol gives
them, it is answered at once from ``initialize_result.json``: pygls's own answer, which
``tests/test_early_answer.py`` keeps equal to what pygls builds for a range of clients (run
that file as a script to rewrite it after a feature is added). The message then goes to pygls
as usual, which sets itself up from it; its answer is compared with the one sent and dropped
(:class:`EarlyAnsweredWire`). Any other first message is pygls's to answer, as before.

Only the standard library and the framing modules are imported here.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lsp import __version__
from rag_lsp.server.framing import FrameGuard
from rag_lsp.server.jsonrpc import LockedWire, claim_stdout, encode_frame

log = logging.getLogger(__name__)

RESULT_FILE = Path(__file__).with_name("initialize_result.json")
# pygls's position encodings, and its choice when the client states none it supports.
ENCODINGS = ("utf-8", "utf-16", "utf-32")
DEFAULT_ENCODING = "utf-16"
# InitializeParams' fields that pygls reads into typed values, with the JSON types the
# protocol allows; a first `initialize` with any other shape is pygls's to answer (or refuse).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "processId": (int, type(None)), "rootUri": (str, type(None)),
    "rootPath": (str, type(None)), "workspaceFolders": (list, type(None)),
    "clientInfo": (dict, type(None)), "locale": (str, type(None)),
    "trace": (str, type(None)), "workDoneToken": (str, int, type(None)),
}
_TRACE_VALUES = ("off", "messages", "verbose")
_REQUIRED = ("processId", "rootUri", "capabilities")  # required by the protocol


def position_encoding(capabilities: dict[str, Any]) -> str | None:
    """The encoding pygls picks for a client with ``capabilities``: the first of the client's
    ``general.positionEncodings`` it supports, else UTF-16. None if the field has a shape
    pygls would not read."""
    general = capabilities.get("general")
    if general is None:
        return DEFAULT_ENCODING
    if not isinstance(general, dict):
        return None
    encodings = general.get("positionEncodings")
    if encodings is None:
        return DEFAULT_ENCODING
    if not isinstance(encodings, list) or not all(isinstance(e, str) for e in encodings):
        return None
    return next((e for e in encodings if e in ENCODINGS), DEFAULT_ENCODING)


def _object_or_none(value: Any) -> dict[str, Any] | None:
    """A JSON object as itself, null as an empty one (pygls reads both), else None."""
    if value is None:
        return {}
    return value if isinstance(value, dict) else None


def client_dependent(capabilities: dict[str, Any]) -> dict[str, Any] | None:
    """What pygls's answer takes from the client's ``capabilities``, as
    ``{"positionEncoding": ..., "textDocumentSync": {...}}``; None if they have a shape pygls
    would not read. pygls states ``willSave`` (false: the server has no such feature) exactly
    when the client states its own, either way."""
    encoding = position_encoding(capabilities)
    document = _object_or_none(capabilities.get("textDocument", {}))
    sync = _object_or_none(document.get("synchronization", {})) if document is not None else None
    if encoding is None or sync is None:
        return None
    stated = {name: sync.get(name) for name in ("willSave", "willSaveWaitUntil")}
    if any(value is not None and not isinstance(value, bool) for value in stated.values()):
        return None
    return {"positionEncoding": encoding,
            "textDocumentSync": {name: False for name, value in stated.items()
                                 if value is not None}}


def _named(value: Any, *fields: str) -> bool:
    """None, or an object whose ``fields`` are strings (a client's info, a folder)."""
    return value is None or (isinstance(value, dict)
                             and all(isinstance(value.get(f), str) for f in fields))


def early_result(message: Any) -> dict[str, Any] | None:
    """The result pygls would answer ``message`` with, if it is an `initialize` this module
    can answer; None otherwise (pygls answers it)."""
    if not isinstance(message, dict) or message.get("method") != "initialize" \
            or "id" not in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict) or any(field not in params for field in _REQUIRED):
        return None
    if not isinstance(params["capabilities"], dict):
        return None
    for field, allowed in _FIELD_TYPES.items():
        value = params.get(field)
        if not isinstance(value, allowed) or isinstance(value, bool):
            return None
    if params.get("trace") not in (None, *_TRACE_VALUES):
        return None
    if not _named(params.get("clientInfo"), "name") or not all(
            folder is not None and _named(folder, "uri", "name")
            for folder in params.get("workspaceFolders") or ()):
        return None
    from_client = client_dependent(params["capabilities"])
    if from_client is None:
        return None
    result = json.loads(RESULT_FILE.read_text(encoding="utf-8"))
    result["capabilities"]["positionEncoding"] = from_client["positionEncoding"]
    result["capabilities"]["textDocumentSync"].update(from_client["textDocumentSync"])
    result["serverInfo"]["version"] = __version__
    return result


class EarlyAnsweredWire:
    """The wire pygls writes to, less its own answer to the `initialize` answered early.

    pygls handles that message first and at once, so the first answer it writes is that one:
    it is compared with the one the client has (a difference means ``initialize_result.json``
    is out of date, and the client may lack a capability: a warning) and dropped. pygls
    writes no answer at all when it cannot read the params (a value lsprotocol does not
    know): then :meth:`unreadable` is called instead, and nothing is dropped.
    """

    def __init__(self, wire: LockedWire, msg_id: Any, sent: dict[str, Any]):
        self._wire = wire
        self._id = msg_id
        self._sent: dict[str, Any] | None = sent  # None once pygls's answer is settled

    @property
    def closed(self) -> bool:
        return self._wire.closed

    def write(self, data: bytes) -> None:
        if self._sent is not None and self._is_the_answer(data):
            return
        self._wire.write(data)

    def flush(self) -> None:
        self._wire.flush()

    def close(self) -> None:
        self._wire.close()

    def unreadable(self, problem: str) -> None:
        """pygls could not read the `initialize` answered early: it will not answer it, and
        the session cannot work. Said to the user, as the early answer could not."""
        if self._sent is not None:
            self._sent = None
            self._tell_user(problem)

    def _tell_user(self, problem: str) -> None:
        log.error("rag-lsp could not read the editor's `initialize` params (%s); this session "
                  "will not work: please report it with the editor's name", problem)
        shown = f"rag-lsp could not read the editor's `initialize`: {problem}"
        self._wire.write(encode_frame({"jsonrpc": "2.0", "method": "window/showMessage",
                                       "params": {"type": 1, "message": shown}}))

    def _is_the_answer(self, data: bytes) -> bool:
        _, _, body = data.partition(b"\r\n\r\n")
        try:
            message = json.loads(body)
        except ValueError:
            return False
        if not isinstance(message, dict) or "method" in message:
            return False  # a notification or a request of ours
        sent, self._sent = self._sent, None  # pygls's first answer: this one or none
        if message.get("id") != self._id:
            log.warning("pygls answered request %s before the `initialize` answered early",
                        message.get("id"))
            return False
        if "error" in message:  # pygls's handling of it failed
            self._tell_user(str(message["error"].get("message", message["error"])))
        elif message.get("result") != sent:
            log.warning("the early `initialize` answer differs from pygls's (sent %s, pygls %s): "
                        "rewrite %s with `python tests/test_early_answer.py`",
                        json.dumps(sent), json.dumps(message.get("result")),
                        RESULT_FILE.name)
        return True


@dataclass
class Opening:
    """The session's stdin and stdout, after the first message was looked at."""

    stdin: FrameGuard  # still holds the first message, for pygls
    wire: LockedWire  # the client's end
    stdout: LockedWire | EarlyAnsweredWire  # what pygls writes to
    answered_early: bool


def open_stdio() -> Opening:
    """Claim stdout, wait for the first message, and answer it if it is an `initialize`."""
    wire = LockedWire(claim_stdout())
    stdin = FrameGuard(sys.stdin.buffer, lambda error: wire.write(encode_frame(error)))
    first = stdin.peek()
    result = early_result(first)
    if result is None:
        return Opening(stdin, wire, wire, answered_early=False)
    wire.write(encode_frame({"jsonrpc": "2.0", "id": first["id"], "result": result}))
    return Opening(stdin, wire, EarlyAnsweredWire(wire, first["id"], result), answered_early=True)
