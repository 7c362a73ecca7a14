"""What a draft of changed files costs a search, in process, this checkout beside another.

While a run re-indexes changed files they are drafted (``rag_lsp.store.draft``): searched by
their words until their chunks are written, and the rows stored for them shown at the lines
their text is at now. Each search reads the draft beside the index.

Each checkout runs in fresh processes taking turns (``--rounds`` each). A process copies a
``server_latency.py`` workdir, opens it as the server does and rewrites ``--files`` of its
files as that bench's re-index does (the same files and text in every process). It embeds
``--queries`` new queries once, so that every search after takes the query's vector from the
cache (the draft never touches the model's call, and the machine's noise in it would hide the
rest). Then it searches them in blocks of 25, each block twice: with the rewritten files
drafted and with nothing drafted, which state first alternating from block to block. The files
are drafted as saves are, 50 at a time (by their words, then narrowed to the stored chunks
they still hold), which is where a run's draft ends up too, except that its term lists may
still name the words-only windows dropped on the way (a run's draft, one step a file, names
none until its first file is written). Per checkout: p50 / p95 ms a search in both states,
their difference, and the parts the engine times (nearest rows, full-text lookups, ranking).

    .venv/bin/python bench/draft_cost.py --workdir /tmp/bench/latency --baseline /tmp/wt-before
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_basics import checkouts, pct, workdir_problem
from engine_latency import HERE, run_child  # this script's folder is on the path

BLOCK = 25
WARM_UP = 40  # searches before the timed ones


def child(workdir: Path, files: int, queries: int, seed: int) -> None:
    from rag_lsp import memory

    memory.set_up_process()  # as `rag-lsp` does, before any library starts a thread
    from server_latency import make_queries, open_copied_workdir, rewrite

    import rag_lsp
    from rag_lsp.indexing.file_text import DRAFT_SAVED_MAX_FILES

    with tempfile.TemporaryDirectory(prefix="draft-cost-") as scratch:
        copy = Path(scratch) / "work"
        shutil.copytree(workdir, copy, symlinks=True)
        ws = open_copied_workdir(copy)
        for query in make_queries(WARM_UP, 1000):
            ws.search(query)
        time.sleep(6.0)  # the in-memory copy loads in the background
        root = copy / "ws"
        paths = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".md"))
        chosen = random.Random(seed).sample(paths, k=min(files, len(paths)))
        rewrite(chosen, seed)
        changed = [str(p.relative_to(root)) for p in chosen]
        asked = make_queries(queries, seed + 1)
        for query in asked:  # their vectors cached (see the module's docstring)
            ws.search(query)
        memory.freeze_long_lived_objects()  # as the server does once a folder is open
        drafted_files = []
        found: dict[str, list[float]] = {"drafted": [], "none": []}
        parts: dict[str, dict[str, list[float]]] = {"drafted": {}, "none": {}}
        for block, start in enumerate(range(0, len(asked), BLOCK)):
            for state in ("drafted", "none") if block % 2 == 0 else ("none", "drafted"):
                if state == "drafted":
                    for at in range(0, len(changed), DRAFT_SAVED_MAX_FILES):
                        ws.draft_saved(changed[at:at + DRAFT_SAVED_MAX_FILES])
                    drafted_files.append(len(ws._draft))  # noqa: SLF001  (files held)
                    if not drafted_files[-1]:
                        raise SystemExit("nothing was drafted (lexicalFirst off?)")
                else:
                    ws._draft.discard()  # noqa: SLF001
                for query in asked[start:start + BLOCK]:
                    started = time.perf_counter()
                    result = ws.search(query)
                    found[state].append((time.perf_counter() - started) * 1000)
                    for name, ms in result.timings.to_dict().items():
                        parts[state].setdefault(name, []).append(ms)
    print(json.dumps({"code": str(Path(rag_lsp.__file__).parent.parent),
                      "drafted_files": max(drafted_files), "ms": found, "parts": parts}))


def summary(got: dict) -> dict:
    """One checkout's figures from its processes' searches (``ms`` and ``parts`` by state):
    p50 / p95 a search in each state, what the draft costs (drafted less none), and the
    median of each part the engine times (not the query's embedding: cached)."""
    search = {state: {"p50": round(pct(ms, 0.5), 2), "p95": round(pct(ms, 0.95), 2)}
              for state, ms in got["ms"].items()}
    parts = {state: {part.removesuffix("_ms"): round(pct(ms, 0.5), 2)
                     for part, ms in timed.items() if part != "query_embedding_ms"}
             for state, timed in got["parts"].items()}
    return {"drafted_files": got["drafted_files"], "search": search, "parts_p50": parts,
            "draft_costs": {q: round(search["drafted"][q] - search["none"][q], 2)
                            for q in ("p50", "p95")}}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True,
                        help="a server_latency.py workdir (copied: it is left as it is)")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--files", type=int, default=150,
                        help="files rewritten and drafted (server_latency.py's re-index: 150)")
    parser.add_argument("--queries", type=int, default=300,
                        help="queries a process searches in each state (a multiple of 50)")
    parser.add_argument("--rounds", type=int, default=2, help="processes per checkout")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    problem = workdir_problem(args.workdir)
    if problem:
        raise SystemExit(problem)
    # (imported here: a measured process sets itself up before it imports the engine)
    from rag_lsp.embedding.embedder import QUERY_CACHE_SIZE

    most = (QUERY_CACHE_SIZE - WARM_UP) // (2 * BLOCK) * (2 * BLOCK)
    if args.files < 1 or args.rounds < 1:
        raise SystemExit("--files and --rounds must be at least 1")
    if not 0 < args.queries <= most or args.queries % (2 * BLOCK):
        # an even number of blocks, so that each state goes first as often; and no more than
        # the embedder keeps vectors of, so that every search finds its query's cached
        raise SystemExit(f"--queries must be a multiple of {2 * BLOCK}, at least {2 * BLOCK} "
                         f"and at most {most}")
    codes = checkouts(HERE.parent, args.baseline)
    merged: dict[str, dict] = {name: {"ms": {}, "parts": {}} for name in codes}
    for round_ in range(args.rounds):
        for name in (list(codes) if round_ % 2 == 0 else list(reversed(codes))):
            answer = run_child(str(Path(__file__).resolve()), codes[name],
                               [str(args.workdir.resolve()), str(args.files), str(args.queries),
                                str(args.seed)], HERE.parent, 1800)
            for state, ms in answer["ms"].items():
                merged[name]["ms"].setdefault(state, []).extend(ms)
            for state, timed in answer["parts"].items():
                for part, ms in timed.items():
                    merged[name]["parts"].setdefault(state, {}).setdefault(part, []).extend(ms)
            merged[name]["drafted_files"] = answer["drafted_files"]
            print(f"[{time.strftime('%H:%M:%S')}] {name}, round {round_ + 1}: "
                  f"{answer['drafted_files']} files drafted", file=sys.stderr, flush=True)
    results = {name: summary(got) for name, got in merged.items()}
    print(f"\na search with {args.files} changed files drafted and with none, ms "
          f"({args.rounds} processes, {args.queries} searches in each state; the query's "
          "vector cached)")
    for name, figures in results.items():
        search, cost = figures["search"], figures["draft_costs"]
        print(f"  {name:<10} drafted p50 {search['drafted']['p50']:5.2f} p95 "
              f"{search['drafted']['p95']:5.2f}   none p50 {search['none']['p50']:5.2f} p95 "
              f"{search['none']['p95']:5.2f}   the draft costs p50 {cost['p50']:+.2f} "
              f"p95 {cost['p95']:+.2f}")
        for state in ("drafted", "none"):
            print(f"  {'':<10}   parts p50, {state}: " + ", ".join(
                f"{part} {ms:.2f}" for part, ms in figures["parts_p50"][state].items()))
    if args.json:
        print(json.dumps(results, indent=2))
    sys.path.insert(0, str(HERE))
    from codebench.engine import write_results
    write_results("draft_cost", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
