"""One error model: the same bad input gets the same code from every ``rag/*`` method, and
every engine error type maps to one documented code and kind (rag_lsp/server/errors.py).

The server runs in this process (``inprocess_lsp``): these are answers to requests, which the
stdio process carries unchanged (``test_server_stdio``, ``test_server_e2e``)."""

from __future__ import annotations

import errno
import time

import pytest

from rag_lsp import errors
from rag_lsp.server.errors import request_error
from rag_lsp.server.methods import REQUESTS

from .inprocess_lsp import InProcessServer

VALID = {
    "rag/search": {"query": "x"},
    "rag/status": {},
    "rag/reindex": {},
    "rag/injectContext": {"mode": "debugger", "query": "x", "tokenBudget": 1000},
    "rag/kb.add": {"mode": "debugger", "content": "x"},
    "rag/kb.search": {"mode": "debugger", "query": "x"},
    "rag/kb.list": {"mode": "debugger"},
    "rag/kb.delete": {"mode": "debugger", "id": "x"},
    "rag/kb.clear": {"mode": "debugger"},
}


def test_every_request_method_is_covered():
    assert set(VALID) == set(REQUESTS)


def _error(answer: dict) -> tuple[int, str | None]:
    assert "error" in answer, answer
    data = answer["error"].get("data") or {}
    return answer["error"]["code"], data.get("kind")


@pytest.fixture(scope="module")
async def server(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("errors")
    (root / "a.py").write_text("def a():\n    return 1\n", encoding="utf-8")
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(root, options={})
        await lsp.wait_for_state("ready")
        yield lsp


# (pygls's named tuples renamed a key that is not a Python name, and could not take
# `type_name`: such a request went unanswered until the seventy-third session)
@pytest.mark.parametrize("bad", ["not an object", [1, 2], {"unknownField": 1}, {"0": 1},
                                 {"type_name": "x"}],
                         ids=["string", "array", "unknown field", "not a name", "type_name"])
async def test_the_same_bad_params_get_the_same_code_from_every_method(server, bad):
    codes = {method: _error(await server.request(method, bad)) for method in REQUESTS}
    assert set(codes.values()) == {(-32602, "bad-input")}, codes


async def test_an_unknown_mode_is_bad_input_for_every_method_that_takes_one(server):
    with_mode = [m for m, params in VALID.items() if "mode" in params]
    codes = {m: _error(await server.request(m, {**VALID[m], "mode": "no-such-mode"}))
             for m in with_mode}
    assert set(codes.values()) == {(-32602, "bad-input")}, codes


async def test_a_disabled_server_refuses_every_method_but_status_the_same_way(tmp_path,
                                                                              embedder):
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(tmp_path, options={"enabled": False})
        answers = {m: await lsp.request(m, params) for m, params in VALID.items()}
    assert "result" in answers.pop("rag/status")
    codes = {m: _error(a) for m, a in answers.items()}
    assert set(codes.values()) == {(-32803, "disabled")}, codes


async def test_every_method_before_initialize_gets_server_not_initialized():
    async with InProcessServer() as lsp:
        started = time.monotonic()
        replies = {m: await lsp.request(m, VALID[m]) for m in REQUESTS}
    codes = {method: _error(reply) for method, reply in replies.items()}
    assert set(codes.values()) == {(-32002, "not-initialized")}, codes
    # At once, not after a wait for a start-up that never comes; and saying what to do.
    assert time.monotonic() - started < 20
    assert "send `initialize`" in replies["rag/kb.list"]["error"]["message"]


@pytest.mark.parametrize(("raised", "code", "kind", "retryable"), [
    (errors.BadInputError("empty query"), -32602, "bad-input", False),
    (errors.IndexBusyError("rebuilding"), -32803, "index-busy", True),
    (errors.IndexMissingError("no index"), -32803, "index-missing", True),
    (errors.ModelNotFoundError("no model"), -32803, "model-missing", False),
    (errors.ModelIntegrityError("bad model"), -32803, "model-missing", False),
    (errors.IndexMismatchError("other model"), -32803, "index-mismatch", False),
    (errors.IndexCorruptError("damaged"), -32803, "index-corrupt", False),
    (errors.DiskFullError("full"), -32803, "disk-full", True),
    (OSError(errno.ENOSPC, "No space left on device"), -32803, "disk-full", True),
    (errors.IndexNotWritableError("read-only"), -32803, "index-not-writable", False),
    (ValueError("a bug"), -32603, "internal", False),
])
def test_each_engine_error_maps_to_one_code_and_kind(raised, code, kind, retryable):
    error = request_error(raised, "rag/search")
    assert (error.code, error.data["kind"], error.data["retryable"]) == (code, kind, retryable)
    assert "Traceback" not in error.message


def test_an_internal_error_says_it_is_a_bug_and_where_to_look():
    error = request_error(KeyError("path"), "rag/kb.add")
    assert error.message.startswith("rag/kb.add: internal error (KeyError")
    assert "server log" in error.message


def test_the_errors_schema_lists_every_kind_and_code_the_server_uses():
    import json
    import re
    from pathlib import Path

    from jsonschema import Draft202012Validator

    import rag_lsp.server.errors as server_errors

    schema = json.loads((Path(__file__).parent.parent / "schemas" / "errors.schema.json")
                        .read_text(encoding="utf-8"))
    kinds = set(schema["properties"]["data"]["properties"]["kind"]["enum"])
    source = Path(server_errors.__file__).read_text(encoding="utf-8")
    used = set(re.findall(r'"([a-z]+(?:-[a-z]+)+|internal|disabled)"', source))
    assert used <= kinds, used - kinds
    validator = Draft202012Validator(schema)
    for raised in (errors.IndexBusyError("x"), ValueError("y"), errors.BadInputError("z")):
        error = request_error(raised, "rag/search")
        validator.validate({"code": error.code, "message": error.message, "data": error.data})


async def test_a_mode_declared_in_the_folder_settings_is_accepted_as_by_the_cli(tmp_path,
                                                                                embedder):
    """`.rag-lsp.json` with extraModes: the CLI accepted the mode, the server refused it."""
    (tmp_path / ".rag-lsp.json").write_text('{"extraModes": ["review"]}', encoding="utf-8")
    (tmp_path / "a.py").write_text("def a():\n    return 1\n", encoding="utf-8")
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(tmp_path, options={})
        listed = await lsp.request("rag/kb.list", {"mode": "review"})
        unknown = await lsp.request("rag/kb.list", {"mode": "no-such-mode"})
    assert listed.get("result") == {"entries": [], "total": 0}, listed
    assert _error(unknown) == (-32602, "bad-input")
