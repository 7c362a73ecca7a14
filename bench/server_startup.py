"""How soon `rag-lsp serve` answers `initialize`: a fresh process per spawn, timed from spawn to
the answer. Beside it, in the same run, the floors and what initialize no longer pays:
``python -c pass`` (the interpreter), ``import lsprotocol.types`` (pygls needs it to answer at
all) and ``import rag_lsp.workspace`` (the engine: LanceDB, pyarrow, numpy, onnxruntime; it
now loads with the model, after the answer).

    .venv/bin/python bench/server_startup.py            # 7 spawns each
    .venv/bin/python bench/server_startup.py --runs 15 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXECUTABLE = ROOT / ".venv" / "bin" / "rag-lsp"


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def time_initialize() -> float:
    started = time.perf_counter()
    process = subprocess.Popen([str(EXECUTABLE), "serve"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        process.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": None, "capabilities": {}}}))
        process.stdin.flush()
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            byte = process.stdout.read(1)
            if not byte:
                raise RuntimeError("rag-lsp serve exited before answering initialize")
            header += byte
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        answer = json.loads(process.stdout.read(length))
        if "result" not in answer:
            raise RuntimeError(f"initialize failed: {answer}")
        return time.perf_counter() - started
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
    args = parser.parse_args()
    rows = {
        "python -c pass": lambda: time_python("pass"),
        "import lsprotocol.types": lambda: time_python("import lsprotocol.types"),
        "rag-lsp serve: initialize answered": time_initialize,
        "import rag_lsp.workspace (the engine)": lambda: time_python("import rag_lsp.workspace"),
    }
    figures: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.runs):  # interleaved, so machine noise hits every row alike
        for name, measure in rows.items():
            figures[name].append(measure())
    summary = {name: {"median_s": round(statistics.median(times), 3),
                      "min_s": round(min(times), 3), "max_s": round(max(times), 3)}
               for name, times in figures.items()}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{'':40} {'median':>8} {'min':>8} {'max':>8}   ({args.runs} spawns each, seconds)")
    for name, row in summary.items():
        print(f"{name:40} {row['median_s']:8.3f} {row['min_s']:8.3f} {row['max_s']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
