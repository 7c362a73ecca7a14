"""One error model: the same bad input gets the same code from every ``rag/*`` method, and
every engine error type maps to one documented code and kind (rag_lsp/server/errors.py)."""

from __future__ import annotations

import errno
import subprocess
import sys

import pytest

from rag_lsp import errors
from rag_lsp.server.errors import request_error
from rag_lsp.server.methods import REQUESTS

from .raw_lsp import RawServer, frame
from .test_server_stdio import parse_frames

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
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("errors")
    (root / "a.py").write_text("def a():\n    return 1\n", encoding="utf-8")
    server = RawServer(root)
    server.wait_for_state("ready")
    yield server
    server.close()


@pytest.mark.parametrize("bad", ["not an object", [1, 2], {"unknownField": 1}],
                         ids=["string", "array", "unknown field"])
def test_the_same_bad_params_get_the_same_code_from_every_method(server, bad):
    codes = {method: _error(server.request(method, bad)) for method in REQUESTS}
    assert set(codes.values()) == {(-32602, "bad-input")}, codes


def test_an_unknown_mode_is_bad_input_for_every_method_that_takes_one(server):
    with_mode = [m for m, params in VALID.items() if "mode" in params]
    codes = {m: _error(server.request(m, {**VALID[m], "mode": "no-such-mode"}))
             for m in with_mode}
    assert set(codes.values()) == {(-32602, "bad-input")}, codes


def test_a_disabled_server_refuses_every_method_but_status_the_same_way(tmp_path):
    server = RawServer(tmp_path, {"enabled": False})
    try:
        answers = {m: server.request(m, params) for m, params in VALID.items()}
    finally:
        server.close()
    assert "result" in answers.pop("rag/status")
    codes = {m: _error(a) for m, a in answers.items()}
    assert set(codes.values()) == {(-32803, "disabled")}, codes


def test_every_method_before_initialize_gets_server_not_initialized():
    requests = b"".join(frame({"jsonrpc": "2.0", "id": n, "method": m, "params": VALID[m]})
                        for n, m in enumerate(REQUESTS, start=1))
    process = subprocess.Popen([sys.executable, "-m", "rag_lsp", "serve"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    stdout, _ = process.communicate(requests, timeout=60)
    replies = {m.get("id"): m for m in parse_frames(stdout)}
    codes = {method: _error(replies[n]) for n, method in enumerate(REQUESTS, start=1)}
    assert set(codes.values()) == {(-32002, "not-initialized")}, codes


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


def test_a_mode_declared_in_the_folder_settings_is_accepted_as_by_the_cli(tmp_path):
    """`.rag-lsp.json` with extraModes: the CLI accepted the mode, the server refused it."""
    (tmp_path / ".rag-lsp.json").write_text('{"extraModes": ["review"]}', encoding="utf-8")
    (tmp_path / "a.py").write_text("def a():\n    return 1\n", encoding="utf-8")
    server = RawServer(tmp_path)
    try:
        listed = server.request("rag/kb.list", {"mode": "review"})
        unknown = server.request("rag/kb.list", {"mode": "no-such-mode"})
    finally:
        server.close()
    assert listed.get("result") == {"entries": [], "total": 0}, listed
    assert _error(unknown) == (-32602, "bad-input")
