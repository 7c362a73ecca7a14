"""After a branch switch: how soon a file the checkout deleted is no longer found, beside
another checkout of rag-lsp's code (``--baseline DIR``), in alternating fresh processes.

A checkout's file events reach the engine as one burst, and both servers hand it over the
same way: ``Workspace.draft_saved(paths)`` (on the language server's reader thread), then
``Workspace.update(paths)`` (its writer thread). Per round and checkout of the code, in a
fresh process: a clone of a benchmark repository's git mirror at ``--from``, indexed (the
shared embedding cache on, each process with its own copy of one that a first process filled
at ``--from``: that index embeds nothing, and the update embeds what is new at ``--to``, as on
a first switch to a branch); ``git checkout --to``; then the draft and the update of the
paths the two differ in (``git diff --no-renames``: a renamed file is its old path deleted
and its new one created) on a thread, while this one searches every 20 ms for each deleted
file: the words of its name, lexically, in that path alone (found: anything returned). The
figure is the time from the start of the hand-over until a deleted file is no longer found,
beside the update's own time. (Searches stop for a file once it is hidden, so the side that
hides them sooner also searches less beside its update.)

    .venv/bin/python bench/checkout_freshness.py --baseline /tmp/wt-before   # cobra, ~5 min
    .venv/bin/python bench/checkout_freshness.py --repo spf13/cobra --from v1.7.0 --to v1.8.0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from branch_switch import git, mirror_of  # this script's folder is on the import path
from codebench.data import DEFAULT_MIRRORS
from engine_latency import run_child
from index_workspace import RESULTS

HERE = Path(__file__).resolve().parent
POLL_SECONDS = 0.02


def diff(clone: Path, old: str, new: str, *only: str) -> list[str]:
    out = subprocess.run(["git", "diff", "--no-renames", "--name-only", *only, old, new],
                         cwd=clone, check=True, capture_output=True, text=True).stdout
    return out.split()


def child(clone: Path, cache: Path, old: str, new: str) -> None:
    """In the measured checkout's process: index, switch, hand the burst over, watch. With
    ``new`` "-", only the index at ``old`` (filling the embedding cache ``cache``)."""
    import rag_lsp
    from rag_lsp.config import Settings
    from rag_lsp.embedding import shared_cache
    from rag_lsp.search.results import SearchFilters
    from rag_lsp.workspace import Workspace

    os.environ[shared_cache.CACHE_DIR_ENV] = str(cache)
    ws = Workspace.open(clone, Settings.from_dict({"indexPath": str(clone) + "-index",
                                                   "embeddingCache": True}))
    started = time.perf_counter()
    first = ws.index()
    index_seconds = time.perf_counter() - started
    if new == "-":
        print(json.dumps({"code": str(Path(rag_lsp.__file__).parent.parent)}))
        return

    def found(path: str) -> bool:
        words = " ".join(re.split(r"[^A-Za-z0-9]+", Path(path).stem)).strip()
        return bool(ws.search(words, mode="lexical",
                              filters=SearchFilters(paths=(f"/{path}",))).results)  # anchored

    deleted = [p for p in diff(clone, old, new, "--diff-filter=D") if found(p)]
    paths = diff(clone, old, new)
    git("checkout", "-q", new, cwd=clone)
    times: dict[str, float] = {}

    def hand_over() -> None:
        ws.draft_saved(paths)
        times["drafted"] = time.perf_counter() - started
        times["update_report"] = ws.update(paths).seconds
        times["updated"] = time.perf_counter() - started

    hidden: dict[str, float] = {}
    started = time.perf_counter()
    worker = threading.Thread(target=hand_over)
    worker.start()
    while worker.is_alive() or len(hidden) < len(deleted):
        for path in deleted:
            if path not in hidden and not found(path):
                hidden[path] = time.perf_counter() - started
        if not worker.is_alive() and len(hidden) < len(deleted):
            break  # found after the update: reported as never hidden
        time.sleep(POLL_SECONDS)
    worker.join()
    print(json.dumps({
        "code": str(Path(rag_lsp.__file__).parent.parent), "paths": len(paths),
        "deleted": deleted, "first_index_s": round(index_seconds, 1),
        "first_index_embedded": first.chunks_embedded,
        "hidden_ms": {p: round(s * 1000) for p, s in hidden.items()},
        "drafted_ms": round(times["drafted"] * 1000),
        "updated_s": round(times["updated"], 2)}))


def measure(code: Path, mirror: Path, work: Path, old: str, new: str, label: str) -> dict:
    """One process of ``code``; with ``new`` "-", the first one, which fills the cache."""
    clone, cache = work / label, work / f"{label}-cache"
    git("clone", "-q", "--shared", "--no-checkout", str(mirror), str(clone))
    git("-c", "advice.detachedHead=false", "checkout", "-q", old, cwd=clone)
    if new != "-":
        subprocess.run(["cp", "-a", str(work / "first-cache"), str(cache)], check=True)
    else:
        cache = work / "first-cache"
    return run_child(str(Path(__file__).resolve()), code, [str(clone), str(cache), old, new],
                     work, 3600)


def summary(run: dict) -> str:
    hidden = sorted(run["hidden_ms"].values())
    never = len(run["deleted"]) - len(hidden)
    shown = (f"{statistics.median(hidden):,.0f} / {max(hidden):,} ms" if hidden else "-")
    return (f"{len(run['deleted'])} deleted files, hidden after p50 / max {shown}"
            + (f", {never} still found after the update" if never else "")
            + f"; draft {run['drafted_ms']:,} ms, update done at {run['updated_s']:.1f} s")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], sys.argv[5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--repo", default="spf13/cobra", help="owner/name (spf13/cobra)")
    parser.add_argument("--from", dest="old", default="v1.5.0", help="first tag (v1.5.0)")
    parser.add_argument("--to", dest="new", default="v1.8.0", help="tag switched to (v1.8.0)")
    parser.add_argument("--mirrors", type=Path, default=DEFAULT_MIRRORS,
                        help=f"folder of git mirrors ({DEFAULT_MIRRORS})")
    parser.add_argument("--baseline", type=Path, help="another checkout of rag-lsp, run first")
    parser.add_argument("--rounds", type=int, default=2, help="rounds a checkout (2)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args()
    mirror = mirror_of(args.repo, args.mirrors)
    codes = {"this tree": HERE.parent}
    if args.baseline:
        codes = {"baseline": args.baseline.resolve(), **codes}
    runs: dict[str, list[dict]] = {name: [] for name in codes}
    with tempfile.TemporaryDirectory(prefix="checkout-freshness-") as tmp:
        work = Path(tmp)
        measure(HERE.parent, mirror, work, args.old, "-", "first")
        for n in range(args.rounds):
            for name, code in codes.items():
                label = f"{name.replace(' ', '-')}-{n}"
                runs[name].append(measure(code, mirror, work, args.old, args.new, label))
                if not args.json:
                    print(f"  round {n + 1}, {name}: {summary(runs[name][-1])}", flush=True)
    result = {"repo": args.repo, "from": args.old, "to": args.new, "runs": runs,
              "date": time.strftime("%Y-%m-%d %H:%M")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "checkout_freshness.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
