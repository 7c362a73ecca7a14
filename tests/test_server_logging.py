"""What the real server process logs, and where: each line reaches the client once, and a
stop the client asked for is not reported as a failure.

vscode-languageclient shows both the server's ``window/logMessage`` and its stderr in one
output channel, so a record sent both ways appeared twice there; and a restart of the
server ("shutdown" + "exit" in the middle of an indexing run) used to end with tracebacks
logged at ERROR level, which the user read as a crash.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from rag_lsp.server.stdio import ClientLogHandler, NotSentToClient
from tests.conftest import make_sample_root, write_files
from tests.raw_lsp import RawServer

WARNING_OR_ERROR = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback")
PROGRESS = {"window": {"workDoneProgress": True}}  # so runs report $/progress, as in VS Code


def _log_messages(server: RawServer) -> list[str]:
    return [n["params"]["message"] for n in server.notifications
            if n["method"] == "window/logMessage"]


@contextmanager
def _serving_sample(tmp_path, stderr) -> Iterator[RawServer]:
    """The server on the sample workspace, once it is ready; closed at the end."""
    server = RawServer(make_sample_root(tmp_path), stderr=stderr)
    try:
        server.wait_for_state("ready")
        yield server
    finally:
        server.close()


def test_a_log_line_reaches_the_client_once_and_not_stderr(tmp_path):
    err = tmp_path / "stderr.txt"
    with err.open("wb") as stderr, _serving_sample(tmp_path, stderr) as server:
        summary = server.wait_for(lambda n: n["method"] == "window/logMessage"
                                  and "files scanned" in n["params"]["message"])
    line = summary["params"]["message"]  # "repo: 5 files scanned, 5 indexed, …"
    assert _log_messages(server).count(line) == 1
    assert "files scanned" not in err.read_text(), err.read_text()
    assert server.process.returncode == 0


def test_a_record_the_client_cannot_get_stays_on_stderr():
    """Before the event loop runs (or once the session is over) nothing can be sent: such a
    record is written to stderr, so it is not lost."""
    out = io.StringIO()
    stderr = logging.StreamHandler(out)
    stderr.addFilter(NotSentToClient())
    sent: list[str] = []
    can_send = False

    def send(_kind, message, _record) -> bool:
        if can_send:
            sent.append(message)
        return can_send

    logger = logging.Logger("rag_lsp.test")  # client handler first, as in the server
    logger.addHandler(ClientLogHandler(send))
    logger.addHandler(stderr)
    logger.info("logged before the loop runs")
    can_send = True
    logger.info("logged while serving")
    assert sent == ["logged while serving"]
    assert out.getvalue() == "logged before the loop runs\n"


def _big_folder(root) -> None:
    """Enough to embed that a run is still going when the client stops the server."""
    for i in range(40):
        write_files(root, {f"pkg/module_{i:03}.py": "\n\n".join(
            f"def step_{i}_{j}(value):\n    \"\"\"Stage {j} of pipeline {i}.\"\"\"\n"
            f"    return value * {j} + {i}\n" for j in range(80))})


def _server_mid_index(tmp_path, root, stderr) -> RawServer:
    """A server on a big folder, once its first indexing run has reported progress."""
    _big_folder(root)
    server = RawServer(root, {"indexPath": str(tmp_path / "index")}, stderr=stderr,
                       capabilities=PROGRESS)
    server.wait_for(lambda n: n["method"] == "$/progress"
                    and n["params"]["value"]["kind"] == "report")
    return server


def test_a_stop_the_client_asks_for_mid_index_logs_no_warning_or_error(tmp_path):
    """VS Code's restart: "shutdown", then "exit", with an indexing run under way and the
    client still sending (a file event) in between."""
    root = tmp_path / "repo"
    err = tmp_path / "stderr.txt"
    with err.open("wb") as stderr:
        server = _server_mid_index(tmp_path, root, stderr)
        assert "result" in server.request("shutdown", None)
        server.notify("workspace/didChangeWatchedFiles", {"changes": [
            {"uri": (root / "pkg" / "module_000.py").as_uri(), "type": 2}]})
        server.notify("exit", None)
        returncode = server.process.wait(timeout=30)
    assert returncode == 0
    logged = err.read_text()
    assert not WARNING_OR_ERROR.search(logged), logged


def test_closing_stdin_mid_index_logs_no_warning_or_error(tmp_path):
    """A client that stops the server by closing its stdin (no "shutdown")."""
    err = tmp_path / "stderr.txt"
    with err.open("wb") as stderr:
        server = _server_mid_index(tmp_path, tmp_path / "repo", stderr)
        server.process.stdin.close()
        server.process.stdout.close()  # the client has gone: nobody reads any more
        returncode = server.process.wait(timeout=30)
    assert returncode == 0
    logged = err.read_text()
    assert not WARNING_OR_ERROR.search(logged), logged


def test_a_refused_request_is_answered_without_a_logged_traceback(tmp_path):
    """A bad argument is the client's to fix: it gets the message; the log gets no ERROR
    line with a traceback, which an editor shows as if the server had failed."""
    err = tmp_path / "stderr.txt"
    with err.open("wb") as stderr, _serving_sample(tmp_path, stderr) as server:
        answer = server.request("rag/search", {"query": "redirects", "topK": 0})
    assert answer["error"]["code"] == -32602 and "topK" in answer["error"]["message"]
    logged = err.read_text() + "\n".join(_log_messages(server))
    assert not WARNING_OR_ERROR.search(logged), logged
