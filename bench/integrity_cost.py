"""What checking an index's file digests costs (see rag_lsp/store/integrity.py).

Builds a chunks table of N rows shaped like real ones (text windows of this repository's own
source, their search text and terms, random 384-d vectors) through ``ChunkStore``, with its
full-text index, compacted and cleaned up; then times, on that table:

- the reader's check when a process opens the index (sizes, and mtimes: no file read);
- the full check at the start of every indexing run (every recorded file read, CRC-32);
- recording every file from scratch (an index of an older rag-lsp, trusted on first sight);
- the record after a commit that added nothing (the fixed cost each commit pays);
- sha256 over the same files, for comparison with the CRC chosen.

Files are read from the page cache (just written); a cold read adds the disk's time for the
size printed.

    .venv/bin/python bench/integrity_cost.py                       # 10k and 100k rows
    .venv/bin/python bench/integrity_cost.py --rows 10000
"""

from __future__ import annotations

import argparse
import hashlib
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag_lsp.store import lance_store  # noqa: E402
from rag_lsp.store.integrity import INTEGRITY_NAME, FileDigests, table_files  # noqa: E402
from rag_lsp.store.lance_store import ChunkStore, FileRecord  # noqa: E402

DIM = 384
TABLES = ("chunks.lance", "files.lance")
WINDOW = 1200  # characters of a chunk's text: about a real chunk's (~250 tokens)


def source_text() -> str:
    parts = [p.read_text(encoding="utf-8", errors="replace")
             for folder in ("rag_lsp", "tests", "bench")
             for p in sorted((ROOT / folder).rglob("*.py"))]
    return "\n".join(parts)


def rows_for(path: str, count: int, first: int, text: str, rng: np.random.Generator) -> list:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    rows = []
    for n in range(count):
        serial = first + n
        start = (serial * 977) % (len(text) - WINDOW)
        body = f"{text[start:start + WINDOW]}\n# chunk {serial}\n"
        terms = " ".join(sorted(set(re.findall(r"[a-z]{3,}", body.lower()))))
        rows.append({
            "id": f"{path}#L{n * 40 + 1}-{serial:08d}", "path": path,
            "start_line": n * 40 + 1, "end_line": n * 40 + 40, "language": "python",
            "kind": "function", "symbol": f"step_{serial}", "text": body,
            "search_text": f"{path} step_{serial}\n{body}", "defines": f"step_{serial}",
            # Uniform like real ones: the background sample picks rows by hash prefix.
            "terms": terms, "content_hash": hashlib.sha256(body.encode()).hexdigest(),
            "vector": vectors[n],
        })
    return rows


def build(index_dir: Path, total: int, per_file: int = 20) -> ChunkStore:
    rng = np.random.default_rng(7)
    text = source_text()
    store = ChunkStore(index_dir, DIM, create=True)
    records: list[FileRecord] = []
    rows: list[dict] = []
    for f in range(max(1, total // per_file)):
        path = f"pkg/module_{f}.py"
        records.append(FileRecord(path, 4000, 1, f"{f:064d}", per_file))
        rows += rows_for(path, per_file, f * per_file, text, rng)
        if len(rows) >= 5000:
            store.replace_files(records, rows)  # each commit records its new files
            records, rows = [], []
    if rows:
        store.replace_files(records, rows)
    store.ensure_fts_index()
    # As the next run finds it: compacted, and the versions a minute keeps cleaned up.
    lance_store._KEEP_OLD_VERSIONS = timedelta(milliseconds=1)
    store.optimize()
    return store


def timed(action: Callable[[], object], repeat: int) -> float:
    """Median milliseconds of ``repeat`` runs."""
    runs = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        runs.append((time.perf_counter() - began) * 1000)
    return statistics.median(runs)


def sha256_all(index_dir: Path) -> None:
    for name in table_files(index_dir, TABLES):
        digest = hashlib.sha256()
        with open(index_dir / name, "rb") as source:
            while block := source.read(1 << 20):
                digest.update(block)


def measure(total: int) -> None:
    with tempfile.TemporaryDirectory(prefix="rag-integrity-") as tmp:
        index_dir = Path(tmp) / "index"
        began = time.perf_counter()
        store = build(index_dir, total)
        built = time.perf_counter() - began
        files = table_files(index_dir, TABLES)
        size = sum(info.st_size for info in files.values())
        digests = FileDigests(index_dir, TABLES)
        assert digests.damage(full=True) is None
        print(f"\n{store.count_chunks()} chunks: {len(files)} files, {size / 1e6:.0f} MB "
              f"(built in {built:.0f} s)")

        def from_scratch() -> None:
            (index_dir / INTEGRITY_NAME).unlink()
            digests.record()

        figures = [
            ("open check (reader: sizes, mtimes)", timed(lambda: digests.damage(full=False), 9)),
            ("full check (start of each run)", timed(lambda: digests.damage(full=True), 3)),
            ("record every file from scratch", timed(from_scratch, 3)),
            ("record after a commit, nothing new", timed(digests.record, 9)),
            ("sha256 of every file (comparison)", timed(lambda: sha256_all(index_dir), 3)),
        ]
        for label, ms in figures:
            print(f"  {label:<38}{ms:>9.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="10000,100000",
                        help="comma-separated table sizes (default: 10000,100000)")
    args = parser.parse_args()
    for total in (int(n) for n in args.rows.split(",")):
        measure(total)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
