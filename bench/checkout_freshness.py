"""After a branch switch: how soon a file the checkout deleted is no longer found, and a file it
changed or created is found by a word it gained, beside another checkout of rag-lsp's code
(``--baseline DIR``), in alternating fresh processes.

A checkout's file events reach the engine as one burst, and both servers hand it over the
same way: ``Workspace.draft_saved(paths)`` (on the language server's reader thread), then
``Workspace.update(paths)`` (its writer thread). Per round and checkout of the code, in a
fresh process: a clone of a benchmark repository's git mirror at ``--from``, indexed (the
shared embedding cache on, each process with its own copy of one that a first process filled
at ``--from``: that index embeds nothing, and the update embeds what is new at ``--to``, as on
a first switch to a branch); ``git checkout --to``; then the draft and the update of the
paths the two differ in (``git diff --no-renames``: a renamed file is its old path deleted
and its new one created) on a thread, while this one searches every 20 ms, lexically and in
one path alone (found: anything returned), for each deleted file by the words of its name,
and for each changed or new file by the longest word of its new text none of whose terms its
old text had (files without one, or not indexed, are left out). Times run from the start of
the hand-over: a server adds its own event batching (30-250 ms) before it. (Searches stop for
a file once it is settled, so the side that settles them sooner also searches less beside its
update.)

    .venv/bin/python bench/checkout_freshness.py --baseline /tmp/wt-before   # cobra, ~4 min
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
from codebench.engine import write_results
from engine_latency import run_child

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

    def found(query: str, path: str) -> bool:
        return bool(ws.search(query, mode="lexical",
                              filters=SearchFilters(paths=(f"/{path}",))).results)  # anchored

    # A deleted file is probed by the words of its name; a changed or new one by a word it
    # gained, none of whose terms its old text had (so its stored chunks cannot answer).
    deleted = {p: " ".join(re.split(r"[^A-Za-z0-9]+", Path(p).stem)).strip()
               for p in diff(clone, old, new, "--diff-filter=D")}
    deleted = {p: q for p, q in deleted.items() if found(q, p)}
    written = {}
    for path in diff(clone, old, new, "--diff-filter=AM"):
        word = gained_word(show(clone, old, path), show(clone, new, path))
        if word and not found(word, path):
            written[path] = word
    paths = diff(clone, old, new)
    git("checkout", "-q", new, cwd=clone)
    times: dict[str, float] = {}

    def hand_over() -> None:
        ws.draft_saved(paths)
        times["drafted"] = time.perf_counter() - started
        ws.update(paths)
        times["updated"] = time.perf_counter() - started

    hidden: dict[str, float] = {}
    shown: dict[str, float] = {}
    started = time.perf_counter()
    worker = threading.Thread(target=hand_over)
    worker.start()
    while True:
        done = not worker.is_alive()  # then one more look: what the update ended with
        for path, query in deleted.items():
            if path not in hidden and not found(query, path):
                hidden[path] = time.perf_counter() - started
        for path, query in written.items():
            if path not in shown and found(query, path):
                shown[path] = time.perf_counter() - started
        if done or (len(hidden) == len(deleted) and len(shown) == len(written)):
            break
        time.sleep(POLL_SECONDS)
    worker.join()
    # Not found even once the update was done: not indexed (an image), or the word not one
    # the index finds in it.
    left_out = sorted(set(written) - set(shown))
    written = {p: w for p, w in written.items() if p in shown}
    print(json.dumps({
        "code": str(Path(rag_lsp.__file__).parent.parent), "paths": len(paths),
        "deleted": sorted(deleted), "written": written, "left_out": left_out,
        "first_index_s": round(index_seconds, 1), "first_index_embedded": first.chunks_embedded,
        "hidden_ms": {p: round(t * 1000) for p, t in hidden.items()},
        "found_ms": {p: round(t * 1000) for p, t in shown.items()},
        "drafted_ms": round(times["drafted"] * 1000),
        "updated_s": round(times["updated"], 2)}))


def show(clone: Path, rev: str, path: str) -> str:
    """``path``'s text at ``rev`` ("" where it does not exist)."""
    out = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=clone, capture_output=True)
    return out.stdout.decode("utf-8", "replace") if out.returncode == 0 else ""


def gained_word(before: str, after: str) -> str | None:
    """The longest plain word of ``after`` whose terms (as the index derives them) ``before``
    has none of; None if there is none."""
    from rag_lsp.terms import text_terms

    gained = text_terms(after) - text_terms(before)
    words = {w for w in re.findall(r"\b[a-z]{6,}\b", after)
             if (terms := text_terms(w)) and terms <= gained}
    return max(words, key=lambda w: (len(w), w)) if words else None


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


def spread(times: dict[str, int], wanted: int) -> str:
    """p50 / max of ``times`` (ms), and how many of ``wanted`` never came."""
    if not times:
        return f"none of {wanted}"
    ms = sorted(times.values())
    return (f"p50 / max {statistics.median(ms):,.0f} / {max(ms):,} ms"
            + (f" ({wanted - len(ms)} never)" if len(ms) < wanted else ""))


def summary(run: dict) -> str:
    deleted, written = len(run["deleted"]), len(run["written"])
    return (f"{deleted} deleted files hidden after {spread(run['hidden_ms'], deleted)}; "
            f"{written} changed or new found after {spread(run['found_ms'], written)} "
            f"({len(run['left_out'])} left out); "
            f"draft {run['drafted_ms']:,} ms, update done at {run['updated_s']:.1f} s")


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
    write_results("checkout_freshness", {"repo": args.repo, "from": args.old, "to": args.new,
                                         "runs": runs, "date": time.strftime("%Y-%m-%d %H:%M")},
                  print_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
