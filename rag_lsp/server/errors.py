"""One error model for every ``rag/*`` request: what went wrong → one JSON-RPC code.

Engine errors are typed (:mod:`rag_lsp.errors`); :func:`rag_request` registers a handler and
maps whatever it raises the same way for every method, with ``data: {kind, retryable}`` so a
client can tell "fix your input" from "try again shortly" from "fix the set-up":

===================  ======  =========  ====================================================
kind                 code    retryable  when
===================  ======  =========  ====================================================
bad-input            -32602  no         params fail the schema, or the engine rejects them
not-initialized      -32002  yes        a request before ``initialize``
disabled             -32803  no         ``enabled`` is false in settings
no-folder            -32803  yes        no workspace folder is open
index-missing        -32803  yes        the folder has no index yet (it is being built)
index-busy           -32803  yes        another process is rebuilding the index
model-missing        -32803  no         the embedding model is not installed or damaged
index-mismatch       -32803  no         the index was written by another model
index-corrupt        -32803  no         the index or knowledge base cannot be read
disk-full            -32803  yes        no space left to write
index-not-writable   -32803  no         the index cannot be written or read (a mount, access)
internal             -32603  no         a bug: the message says so, the log has the trace
===================  ======  =========  ====================================================

-32803 is LSP's RequestFailed: a well-formed request the server could not serve.
"""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pygls.exceptions import FeatureRequestError, JsonRpcException

from rag_lsp import errors

log = logging.getLogger(__name__)

INVALID_PARAMS, NOT_INITIALIZED, REQUEST_FAILED, INTERNAL = -32602, -32002, -32803, -32603

# (engine error type, kind, code, retryable): the first match wins, so subclasses go first.
_ENGINE_ERRORS: list[tuple[type[Exception], str, int, bool]] = [
    (errors.BadInputError, "bad-input", INVALID_PARAMS, False),
    (errors.IndexBusyError, "index-busy", REQUEST_FAILED, True),
    (errors.IndexMissingError, "index-missing", REQUEST_FAILED, True),
    (errors.ModelNotFoundError, "model-missing", REQUEST_FAILED, False),
    (errors.ModelIntegrityError, "model-missing", REQUEST_FAILED, False),
    (errors.IndexMismatchError, "index-mismatch", REQUEST_FAILED, False),
    (errors.IndexCorruptError, "index-corrupt", REQUEST_FAILED, False),
    (errors.DiskFullError, "disk-full", REQUEST_FAILED, True),
    (errors.IndexNotWritableError, "index-not-writable", REQUEST_FAILED, False),
    (errors.ConfigError, "bad-input", INVALID_PARAMS, False),
]


class RagRequestError(JsonRpcException):
    """A request that could not be served; the message says why and what to do."""

    CODE = REQUEST_FAILED

    def __init__(self, message: str, kind: str = "request-failed", *,
                 code: int = REQUEST_FAILED, retryable: bool = False):
        super().__init__(message=message, code=code,
                         data={"kind": kind, "retryable": retryable})
        self.kind = kind


def bad_input(message: str) -> RagRequestError:
    return RagRequestError(message, "bad-input", code=INVALID_PARAMS)


def not_initialized(message: str) -> RagRequestError:
    return RagRequestError(message, "not-initialized", code=NOT_INITIALIZED, retryable=True)


def request_error(exc: BaseException, method: str) -> RagRequestError:
    """The one mapping from anything a handler raised to what the client receives."""
    if isinstance(exc, RagRequestError):
        return exc
    if isinstance(exc, JsonRpcException):  # pygls's own (-32602 from parse_params, …)
        kind = "bad-input" if exc.code == INVALID_PARAMS else "request-failed"
        return RagRequestError(exc.message, kind, code=exc.code)
    for kind_of, kind, code, retryable in _ENGINE_ERRORS:
        if isinstance(exc, kind_of):
            return RagRequestError(str(exc), kind, code=code, retryable=retryable)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return RagRequestError(f"{method}: no space left on the device ({exc}); free some "
                               "space and try again", "disk-full", retryable=True)
    if isinstance(exc, errors.RagLspError):
        return RagRequestError(str(exc))
    log.error("%s failed", method, exc_info=exc)
    return RagRequestError(f"{method}: internal error ({type(exc).__name__}: {exc}); this is "
                           "a bug in rag-lsp, the server log has the details",
                           "internal", code=INTERNAL)


Handler = Callable[[Any, Any], Awaitable[Any]]


def rag_request(server: Any, method: str) -> Callable[[Handler], Handler]:
    """Register ``handler`` for ``method``, its errors mapped by :func:`request_error`."""

    def register(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def guarded(ls: Any, params: Any) -> Any:
            try:
                if not ls.initialize_received:  # LSP: every request waits for initialize
                    raise not_initialized("the server is not initialized: send `initialize`, "
                                          "then `initialized`, first")
                return await handler(ls, params)
            except Exception as exc:  # every error leaves as one documented code
                raise request_error(exc, method) from exc

        server.feature(method)(guarded)
        return guarded

    return register


def report_server_error(server: Any, error: Exception, source: Any) -> None:
    """pygls's hook for a failure no request answers: a malformed notification (a cancel
    with a list for an id, a bad file event), a message that could not be read, a handler
    of a notification that raised. Logged with its traceback (the editor's output shows
    it), not popped up as "Error in server: …", which says nothing a user can act on. A
    request's own error goes back to its sender (pygls, too, stops there)."""
    if source is FeatureRequestError:
        return
    log.error("a message from the client could not be handled: %s", error, exc_info=error)
