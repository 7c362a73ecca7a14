"""How soon `rag-lsp serve` answers `initialize`, and the request sent right after it: a fresh
process per spawn, timed from spawn. Beside it, in the same run, the floors and what the answer
no longer waits for: ``python -c pass`` (the interpreter), ``import lsprotocol.types`` (pygls
needs it to answer anything; `initialize` is answered before it loads, the next request after)
and ``import rag_lsp.workspace`` (the engine: LanceDB, pyarrow, numpy, onnxruntime; it loads
with the model, after both). ``--baseline DIR`` times another checkout's server beside.

    .venv/bin/python bench/server_startup.py            # 7 spawns each
    .venv/bin/python bench/server_startup.py --runs 15 --json --baseline /tmp/wt-before
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_answer(stdout, msg_id: int) -> dict:
    """The next answer to request ``msg_id`` on ``stdout`` (other messages are skipped)."""
    while True:
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            byte = stdout.read(1)
            if not byte:
                raise RuntimeError("rag-lsp serve exited before answering")
            header += byte
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        message = json.loads(stdout.read(length))
        if "method" not in message and message.get("id") == msg_id:
            if "result" not in message:
                raise RuntimeError(f"request {msg_id} failed: {message}")
            return message


def time_session(code: Path) -> tuple[float, float]:
    """Seconds from spawn to the answer to `initialize`, and to the answer to the request
    sent right after it (`shutdown`): when the server serves requests."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    started = time.perf_counter()
    # -P: the checkout on PYTHONPATH, not the current folder nor this one's editable install
    process = subprocess.Popen([sys.executable, "-P", "-m", "rag_lsp", "serve"], cwd=code,
                               env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    try:
        process.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": None, "capabilities": {}}}))
        process.stdin.flush()
        read_answer(process.stdout, 1)
        answered = time.perf_counter() - started
        process.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
                            + frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        process.stdin.flush()
        read_answer(process.stdout, 2)
        return answered, time.perf_counter() - started
    finally:
        process.kill()
        process.wait()


def time_python(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="spawns per row (default 7)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout (a git worktree) whose server is timed beside")
    args = parser.parse_args()
    floors = {
        "python -c pass": "pass",
        "import lsprotocol.types": "import lsprotocol.types",
        "import rag_lsp.workspace (the engine)": "import rag_lsp.workspace",
    }
    servers = {"rag-lsp serve": ROOT}
    if args.baseline:
        servers = {"baseline": args.baseline.resolve(), **servers}
    figures: dict[str, list[float]] = {}
    for _ in range(args.runs):  # interleaved, so machine noise hits every row alike
        for name, code in floors.items():
            figures.setdefault(name, []).append(time_python(code))
        for name, checkout in servers.items():
            answered, served = time_session(checkout)
            figures.setdefault(f"{name}: initialize answered", []).append(answered)
            figures.setdefault(f"{name}: next request answered", []).append(served)
    summary = {name: {"median_s": round(statistics.median(times), 3),
                      "min_s": round(min(times), 3), "max_s": round(max(times), 3)}
               for name, times in figures.items()}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{'':44} {'median':>8} {'min':>8} {'max':>8}   ({args.runs} spawns each, seconds)")
    for name, row in summary.items():
        print(f"{name:44} {row['median_s']:8.3f} {row['min_s']:8.3f} {row['max_s']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
