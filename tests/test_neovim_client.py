"""Neovim 0.7 (Debian's `neovim` package) as a real LSP client of `rag-lsp serve`.

The harness tests/nvim/rag_client.lua starts the server with vim.lsp.start_client, waits
for `rag/indexStatus` state "ready", runs `rag/search`, writes a new file on disk and polls
`rag/search` until the server's own watcher has indexed it, then shuts the server down.
It writes a JSON report of every step, which this test asserts on (and prints on failure).

Needs `nvim` on PATH: `make tools` installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import write_files

HARNESS = Path(__file__).resolve().parent / "nvim" / "rag_client.lua"
REPO = Path(__file__).resolve().parents[1]
NVIM_TIMEOUT_S = 120
WATCH_TIMEOUT_MS = 10_000

WORKSPACE_FILES = {
    "billing/invoices.py": '''
        """Invoices: reading the documents customers are billed with."""

        from decimal import Decimal

        VAT_RATE = Decimal("0.20")


        def parse_invoice_total(text: str) -> Decimal:
            """Parse an invoice and return the total amount due, tax included.

            Each line item looks like ``<description>; <quantity>; <unit price>``.
            """
            subtotal = Decimal("0")
            for line in text.splitlines():
                if not line.strip():
                    continue
                _description, quantity, unit_price = line.split(";")
                subtotal += Decimal(quantity) * Decimal(unit_price)
            return (subtotal * (1 + VAT_RATE)).quantize(Decimal("0.01"))
        ''',
    "geometry/shapes.py": '''
        """Plane geometry helpers."""


        def polygon_area(points: list[tuple[float, float]]) -> float:
            """Area of a simple polygon from its vertices (shoelace formula)."""
            twice_area = 0.0
            for (x1, y1), (x2, y2) in zip(points, points[1:] + points[:1]):
                twice_area += x1 * y2 - x2 * y1
            return abs(twice_area) / 2
        ''',
    "net/retry.py": '''
        """Retrying flaky network calls."""

        import random
        import time


        def retry_with_backoff(call, attempts: int = 5, base_delay: float = 0.1):
            """Call `call` until it succeeds, sleeping exponentially longer between tries."""
            for attempt in range(attempts):
                try:
                    return call()
                except ConnectionError:
                    if attempt == attempts - 1:
                        raise
                    time.sleep(base_delay * 2**attempt * (1 + random.random()))
        ''',
}
QUERY = "how is the amount due on a customer's bill computed, with tax?"
EXPECT_PATH = "billing/invoices.py"

NEW_PATH = "weather.py"
NEW_BODY = textwrap.dedent(
    '''
    """Weather forecasting."""


    def forecast_rainfall_probability(humidity: float, pressure_hpa: float) -> float:
        """Estimate the chance that it rains tomorrow from humidity and air pressure."""
        score = 0.6 * humidity + 0.4 * max(0.0, (1013.0 - pressure_hpa) / 40.0)
        return min(1.0, max(0.0, score))
    '''
).lstrip("\n")
NEW_QUERY = "what is the chance of rain tomorrow"


def _server_cmd() -> list[str]:
    """`rag-lsp serve` from the virtualenv running the tests (else the project's .venv)."""
    for bin_dir in (Path(sys.executable).parent, REPO / ".venv" / "bin"):
        exe = bin_dir / "rag-lsp"
        if exe.is_file():
            return [str(exe), "serve"]
    pytest.fail("no rag-lsp executable next to the test interpreter or in .venv: run `make setup`")


def _tail(path: Path, lines: int = 80, width: int = 400) -> str:
    if not path.is_file():
        return f"(no {path})"
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    return "\n".join(line if len(line) <= width else line[:width] + " …" for line in text)


def _step(report: dict, name: str) -> dict:
    for step in report.get("steps", []):
        if step.get("name") == name:
            return step
    return {}


@pytest.mark.nvim
def test_neovim_client_searches_and_sees_new_files(tmp_path, model_files):
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.fail("nvim is not on PATH: run `make tools` (installs Debian's neovim package)")

    root = tmp_path / "workspace"
    write_files(root, WORKSPACE_FILES)
    index_dir = tmp_path / "index"
    home = tmp_path / "nvim-home"  # isolates Neovim's state; the LSP log lands in cache/nvim
    out = tmp_path / "report.json"
    settings = {"indexPath": str(index_dir)}

    env = dict(os.environ)
    env.update(
        {
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "RAG_SERVER_CMD": json.dumps(_server_cmd()),
            "RAG_ROOT": str(root),
            "RAG_OUT": str(out),
            "RAG_SETTINGS": json.dumps(settings),
            "RAG_QUERY": QUERY,
            "RAG_EXPECT_PATH": EXPECT_PATH,
            "RAG_NEW_PATH": NEW_PATH,
            "RAG_NEW_BODY": NEW_BODY,
            "RAG_NEW_QUERY": NEW_QUERY,
            "RAG_WATCH_TIMEOUT_MS": str(WATCH_TIMEOUT_MS),
            "RAG_POLL_MS": "200",
            "RAG_TOTAL_TIMEOUT_MS": str((NVIM_TIMEOUT_S - 10) * 1000),
        }
    )
    harness = str(HARNESS).replace("\\", "\\\\").replace(" ", "\\ ")
    # The trailing cquit only runs if the harness returned without quitting.
    argv = [nvim, "--headless", "--clean", "-u", "NONE"]
    argv += ["-c", f"luafile {harness}", "-c", "cquit 99"]

    started = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=NVIM_TIMEOUT_S,
        )
        returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, stdout, stderr = "timeout", exc.stdout, exc.stderr
    wall_s = time.monotonic() - started

    report = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    lsp_log = Path(report.get("lsp_log") or home / "cache" / "nvim" / "lsp.log")

    def explain(what: str) -> str:
        return (
            f"{what}\n--- nvim exit: {returncode} after {wall_s:.1f} s\n"
            f"--- report ({out}):\n{json.dumps(report, indent=1, sort_keys=True)}\n"
            f"--- nvim stdout:\n{stdout or ''}\n--- nvim stderr:\n{stderr or ''}\n"
            f"--- tail of {lsp_log}:\n{_tail(lsp_log)}"
        )

    assert report, explain("the harness wrote no report")
    assert returncode == 0 and report.get("ok"), explain(f"failed: {report.get('failure')}")
    assert report["errors"] == [], explain("vim.lsp reported client errors")

    states = [n["state"] for n in report["notifications"]]
    assert "ready" in states, explain("no rag/indexStatus ready")
    assert "indexing" in states[: states.index("ready")], explain("no 'indexing' before 'ready'")
    ready = _step(report, "wait_ready")
    assert ready["files"] == len(WORKSPACE_FILES), explain("ready status counts the wrong files")
    assert ready["chunks"] >= len(WORKSPACE_FILES), explain("fewer chunks than files")

    search = _step(report, "search")
    first = search["results"][0]
    assert first["path"] == EXPECT_PATH, explain("wrong first result")
    assert search["first_uri_fname"] == str(root / EXPECT_PATH), explain("uri is not the file")
    assert first["language"] == "python", explain("wrong language")
    assert first["start_line"] is not None and first["has_snippet"], explain("no range/snippet")
    assert search["mode"] in ("vector", "lexical", "hybrid"), explain("bad mode")

    watch = _step(report, "watch")
    assert watch["rank"] == 1, explain(f"{NEW_PATH} found, but not first")
    assert watch["elapsed_ms"] <= WATCH_TIMEOUT_MS, explain("new file found too late")

    # The server's log lines come as window/logMessage (not also on stderr, which Neovim
    # writes to its log as errors): the run's summary among them.
    logged = [m["params"]["message"] for m in report["messages"] if m["kind"] == "log"]
    assert any("files scanned" in line for line in logged), explain("no log message")

    shutdown = _step(report, "shutdown")
    assert shutdown["exit"]["code"] == 0, explain("server exit code after shutdown/exit")

    assert index_dir.is_dir() and any(index_dir.iterdir()), explain("indexPath was not used")
    assert not (root / ".rag-lsp").exists(), explain("index written into the workspace")

    print(
        f"nvim {report['nvim']['major']}.{report['nvim']['minor']}.{report['nvim']['patch']}: "
        f"initialized at {_step(report, 'initialize')['t_done_ms']} ms, "
        f"ready at {ready['t_done_ms']} ms ({ready['files']} files, {ready['chunks']} chunks), "
        f"search {search['rtt_ms']:.0f} ms, new file searchable after "
        f"{watch['elapsed_ms']:.0f} ms ({watch['polls']} polls), "
        f"exit at {shutdown['exit']['t_ms']} ms; nvim wall {wall_s:.1f} s"
    )
