"""Indexing the code-retrieval benchmark's repositories from scratch: files, chunks, seconds.

Each repository's extracted tree (bench/cache/src, see code_retrieval.py) is indexed into a
fresh temporary index with default settings and the real model, and the run is timed end to
end (scan, chunking, embedding, writes, full-text index). To compare two versions of the
code side by side, run it from both checkouts in turn, one repository at a time
(``--repo``), so both see the same machine:

    .venv/bin/python bench/index_repos.py --json
    PYTHONPATH=/tmp/oldtree .venv/bin/python /tmp/oldtree/bench/index_repos.py --repo gin
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.data import annotated_repos, load_repo_specs, source_tree  # noqa: E402
from codebench.engine import add_common_options, open_workspace  # noqa: E402


def index_once(tree: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="index-repos-") as tmp:
        # The model is what is timed: vectors from the shared cache would hide it.
        ws = open_workspace(tree, Path(tmp) / "index", {"embeddingCache": False})
        started = time.perf_counter()
        report = ws.index()
        seconds = time.perf_counter() - started
    return {"files": report.files_indexed, "chunks": report.chunks_total,
            "seconds": round(seconds, 1),
            "chunks_per_s": round(report.chunks_total / seconds, 1) if seconds else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_options(parser)
    parser.add_argument("--repo", action="append", default=[], help="only these repositories")
    args = parser.parse_args()
    specs = load_repo_specs(args.data)
    rows = {}
    for repo in args.repo or annotated_repos(args.data):
        tree = source_tree(specs[repo], args.mirrors, args.cache)
        rows[repo] = index_once(tree)
        if not args.json:
            r = rows[repo]
            print(f"{repo:<12} {r['files']:>6} files {r['chunks']:>7} chunks "
                  f"{r['seconds']:>7.1f} s {r['chunks_per_s']:>7.1f} chunks/s", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
