"""Branch switches, worktrees and clones of a real repository, without and with the shared
embedding cache (``rag_lsp/embedding/shared_cache.py``), side by side in one run.

For each configuration (cache off, then on, each with an empty cache folder of its own),
on a clone of a benchmark repository's git mirror:

1. check out ``--from`` and index it (a first index: everything is embedded);
2. ``git checkout --to`` and index (the files that differ between the two tags);
3. ``git checkout --from`` again and index (back to the first branch);
4. ``git worktree add`` of ``--to`` and index that second worktree;
5. a fresh ``git clone`` at ``--from`` and index it.

Each step prints chunks embedded by the model, chunks taken from the cache, and seconds.
At the end the two configurations' indexes answer the same queries: the top results must
be the same files in the same order, with scores within 1e-4 (a cached vector is the vector
the model computed; one computed again in another batch differs in its last bits).

    .venv/bin/python bench/branch_switch.py                      # gin v1.11.0 <-> v1.12.0
    .venv/bin/python bench/branch_switch.py --repo spf13/cobra --from v1.10.1 --to v1.10.2
    .venv/bin/python bench/branch_switch.py --json
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.data import DEFAULT_MIRRORS  # noqa: E402
from codebench.engine import shared_embedder, write_results  # noqa: E402

from rag_lsp.config import Settings  # noqa: E402
from rag_lsp.embedding import shared_cache  # noqa: E402
from rag_lsp.workspace import Workspace  # noqa: E402

QUERIES = ("how are route parameters parsed from the path", "render a JSON response",
           "middleware that recovers from panics", "bind a request body to a struct",
           "where is the help text of a command printed")


def git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def mirror_of(repo: str, mirrors: Path) -> Path:
    owner, name = repo.split("/")
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / f"{owner}+{name}",
                      mirrors / f"{name}.git"):
        if (candidate / "HEAD").exists():
            return candidate
    raise SystemExit(f"no git mirror of {repo} under {mirrors}: fetch it (the fetch tool with "
                     f"github:{repo}) or pass --mirrors")


def index(root: Path, work: Path, cached: bool, label: str) -> dict:
    settings = Settings.from_dict({"indexPath": str(work / "indexes" / root.name),
                                   "embeddingCache": cached})
    ws = Workspace.open(root, settings, embedder=shared_embedder())
    started = time.perf_counter()
    report = ws.index()
    row = {"step": label, "files": report.files_indexed, "embedded": report.chunks_embedded,
           "from_cache": report.chunks_cached, "reused": report.chunks_reused,
           "chunks": report.chunks_total, "seconds": round(time.perf_counter() - started, 2)}
    print(f"  {label:<34} {row['files']:>6} {row['embedded']:>9} {row['from_cache']:>11} "
          f"{row['reused']:>7} {row['seconds']:>8.1f}", flush=True)
    return row


def run(mirror: Path, old: str, new: str, work: Path, cached: bool) -> tuple[list, dict]:
    os.environ[shared_cache.CACHE_DIR_ENV] = str(work / "user-cache")
    clone = work / "clone"
    git("clone", "-q", "--shared", "--no-checkout", str(mirror), str(clone))
    git("-c", "advice.detachedHead=false", "checkout", "-q", old, cwd=clone)
    rows = [index(clone, work, cached, f"first index of {old}")]
    git("checkout", "-q", new, cwd=clone)
    rows.append(index(clone, work, cached, f"git checkout {new}"))
    git("checkout", "-q", old, cwd=clone)
    rows.append(index(clone, work, cached, f"git checkout {old} (back)"))
    git("worktree", "add", "-q", "--detach", str(work / "worktree"), new, cwd=clone)
    rows.append(index(work / "worktree", work, cached, f"second worktree at {new}"))
    git("clone", "-q", "--shared", "--no-checkout", str(mirror), str(work / "fresh"))
    git("-c", "advice.detachedHead=false", "checkout", "-q", old, cwd=work / "fresh")
    rows.append(index(work / "fresh", work, cached, f"fresh clone at {old}"))
    answers = {}
    ws = Workspace.open(clone, Settings.from_dict({"indexPath": str(work / "indexes" / "clone"),
                                                   "embeddingCache": cached}),
                        embedder=shared_embedder())
    for query in QUERIES:
        answers[query] = [(r.path, r.score) for r in ws.search(query, top_k=5).results]
    shared_cache.close_all()
    return rows, answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default="gin-gonic/gin", help="owner/name of a git mirror")
    parser.add_argument("--from", dest="old", default="v1.11.0", help="first tag or commit")
    parser.add_argument("--to", dest="new", default="v1.12.0", help="second tag or commit")
    parser.add_argument("--mirrors", type=Path, default=DEFAULT_MIRRORS,
                        help="folder of git mirrors (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    mirror = mirror_of(args.repo, args.mirrors)
    results: dict = {"repo": args.repo, "from": args.old, "to": args.new, "configs": {}}
    answers = {}
    print(f"{args.repo} {args.old} <-> {args.new}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}")
    for cached in (False, True):
        name = "shared cache" if cached else "no cache"
        print(f"\n{name}:\n  {'step':<34} {'files':>6} {'embedded':>9} {'from cache':>11} "
              f"{'reused':>7} {'seconds':>8}")
        with tempfile.TemporaryDirectory(prefix="rag-branch-") as tmp:
            rows, answers[name] = run(mirror, args.old, args.new, Path(tmp), cached)
        results["configs"][name] = rows
    before, after = results["configs"]["no cache"], results["configs"]["shared cache"]
    print("\nafter the first index      embedded (no cache -> cache)    seconds")
    for a, b in zip(before[1:], after[1:], strict=True):
        print(f"  {a['step']:<34} {a['embedded']:>6} -> {b['embedded']:<6} "
              f"{a['seconds']:>8.1f} -> {b['seconds']:.1f}")
    # Vectors computed in another batch differ in the last bits (padding changes the
    # arithmetic), so scores are compared to 1e-4, files and their order exactly.
    plain, cached = answers["no cache"], answers["shared cache"]
    same_files = all([p for p, _ in plain[q]] == [p for p, _ in cached[q]] for q in QUERIES)
    gap = max((abs(a[1] - b[1]) for q in QUERIES for a, b in zip(plain[q], cached[q],
                                                                  strict=False)),
              default=0.0)
    same = same_files and gap < 1e-4
    results.update(same_answers=same, answers=answers, largest_score_gap=gap)
    print(f"\nthe two indexes answer {len(QUERIES)} queries with the same files in the same "
          f"order: {'yes' if same_files else 'NO'}; largest score difference {gap:.1e}")
    write_results("branch_switch", results, print_json=args.json)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
