"""What the secret filter costs a file: ``redact_secrets`` beside the three patterns run over the
whole text (what it did before it looked first for what each match must contain), file by
file in turn, in one process, with the outputs compared.

Why it matters beyond the CPU: a regular expression holds Python's interpreter for as long as
it runs, so an indexing thread redacting a file holds up, for that long, every step a search
hands from one thread to another. "longest" is the longest single call of each.

Inputs: a workspace of ``index_workspace.py``'s generator (``--files``, 500 by default, as
``server_latency.py`` makes it) and any ``--folder`` (a source tree, read as the indexer reads
files: text files up to ``maxFileBytes``).

    .venv/bin/python bench/redaction_cost.py
    .venv/bin/python bench/redaction_cost.py --folder ~/src/some-repo --rounds 5 --json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_basics import pct  # noqa: E402
from index_workspace import generate  # noqa: E402

from rag_lsp.config import Settings  # noqa: E402
from rag_lsp.indexing import secrets  # noqa: E402
from rag_lsp.indexing.secrets import REDACTED, redact_secrets  # noqa: E402


def whole_text_patterns(text: str) -> str:
    """``redact_secrets`` as it was: each pattern over the whole text."""
    text = secrets._PRIVATE_KEY.sub(
        lambda m: m.group(1) + re.sub(r"[^\n]+", REDACTED, m.group(2)) + m.group(3), text)
    text = secrets._TOKENS.sub(REDACTED, text)
    return secrets._ASSIGNMENT.sub(secrets._redact_assignment, text)


def read_texts(folder: Path, max_bytes: int) -> list[str]:
    texts = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.stat().st_size > max_bytes or ".git" in path.parts:
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary: the indexer skips it
        texts.append(data.decode("utf-8", errors="replace"))
    return texts


def measure(texts: list[str], rounds: int) -> dict:
    """Per-file milliseconds of each (the best of ``rounds`` passes, which go in turn: before,
    after, before, ...), and how many files the two redact differently."""
    best = {"before": [float("inf")] * len(texts), "after": [float("inf")] * len(texts)}
    differ = redacted = 0
    for round_ in range(rounds):
        for name, redact in (("before", whole_text_patterns), ("after", redact_secrets)):
            times = best[name]
            for i, text in enumerate(texts):
                started = time.perf_counter()
                redact(text)
                times[i] = min(times[i], (time.perf_counter() - started) * 1000)
        if round_ == 0:
            for text in texts:
                expected = whole_text_patterns(text)
                differ += redact_secrets(text) != expected
                redacted += expected != text
    out = {"files": len(texts), "mb": round(sum(len(t) for t in texts) / 1e6, 2),
           "files_with_secrets_redacted": redacted, "files_redacted_differently": differ}
    for name, times in best.items():
        out[name] = {"p50_ms": round(pct(times, 0.5), 3), "p95_ms": round(pct(times, 0.95), 3),
                     "longest_ms": round(max(times, default=0.0), 3),
                     "total_ms": round(sum(times), 1)}
    out["total_ratio"] = round(out["before"]["total_ms"] / max(out["after"]["total_ms"], 1e-9), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=500,
                        help="files of the generated workspace (0: none)")
    parser.add_argument("--folder", type=Path, action="append", default=[],
                        help="a source tree to read as well (repeatable)")
    parser.add_argument("--rounds", type=int, default=3, help="passes of each, in turn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args()
    max_bytes = Settings().max_file_bytes
    inputs: dict[str, list[str]] = {}
    if args.files:
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp), args.files, args.seed)
            inputs[f"generated ({args.files} files)"] = read_texts(Path(tmp), max_bytes)
    for folder in args.folder:
        if not folder.is_dir():
            parser.error(f"--folder {folder}: not a folder")
        inputs[str(folder)] = read_texts(folder, max_bytes)
    results = {name: measure(texts, args.rounds) for name, texts in inputs.items()}
    if args.json:
        print(json.dumps(results))
        return
    print("| input | files | MB | per file p50 / p95 / longest ms, before | after | "
          "total ms before / after | ratio | redacted differently |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        b, a = r["before"], r["after"]
        print(f"| {name} | {r['files']} | {r['mb']} | {b['p50_ms']} / {b['p95_ms']} / "
              f"{b['longest_ms']} | {a['p50_ms']} / {a['p95_ms']} / {a['longest_ms']} | "
              f"{b['total_ms']} / {a['total_ms']} | {r['total_ratio']}x | "
              f"{r['files_redacted_differently']} of {r['files']} "
              f"({r['files_with_secrets_redacted']} with secrets) |")


if __name__ == "__main__":
    main()
