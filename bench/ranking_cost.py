"""What the ranking costs a search, and whether two checkouts rank alike, on one real index.

Each checkout runs in a fresh process: it opens the index as a server does, warms up, runs
``--queries`` new searches and keeps what each handed to the ranking (the candidates' rows
and cosines, the query's analysis and calibration). Then it ranks those again, untimed once
to print a digest of every candidate's score and every file's place (scores to 12
decimals), and timed ``--rounds`` times: the candidates made from the rows (with the
query's terms each holds), query support and cohesion, scoring, files by agreement and the
first ten files' ranges, in ms a search. Equal digests: the two checkouts gave every
candidate of every search the same score (to 12 decimals), and every file the same place.
Queries: ``server_latency.py``'s, or a file of one query a line (``--query-file``, e.g.
SciFact's). The passes re-rank the same searches, so what a process caches across searches
is warm: keep ``--queries`` in the hundreds (the code before 2026-12-02 cached 8,192 word and
path-part pairs, which a few searches would fit).

    .venv/bin/python bench/ranking_cost.py --root /tmp/bench/latency/ws \\
        --index /tmp/bench/latency/index/ws-* --baseline /tmp/wt-before
"""

from __future__ import annotations

import argparse
import copy
import gc
import hashlib
import json
import sys
import time
from pathlib import Path

from engine_latency import HERE, WARM_UP, run_child  # this script's folder is on the path


def child(index_dir: Path, root: Path, queries: int, query_file: str, rounds: int) -> None:
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)  # (as the `rag-lsp` command does first)
    from server_latency import make_queries

    import rag_lsp
    import rag_lsp.search.pipeline as pipeline
    from rag_lsp.config import Settings
    from rag_lsp.search.ranking import Candidate, order_ranges, rank_files, score_chunks
    from rag_lsp.workspace import Workspace

    ws = Workspace.open(root, Settings.from_dict({"indexPath": str(index_dir)}))
    for query in make_queries(WARM_UP, 1000):
        ws.search(query)
    time.sleep(6.0)  # the in-memory copy loads in the background
    asked = (Path(query_file).read_text("utf-8").splitlines()[:queries] if query_file
             else make_queries(queries, 7))
    kept = []
    score = pipeline.score_chunks

    def keeping(candidates, ctx):
        kept.append(([copy.deepcopy(c.row) for c in candidates],
                     [c.cosine for c in candidates], ctx))
        return score(candidates, ctx)

    pipeline.score_chunks = keeping
    for query in asked:
        ws.search(query)
    pipeline.score_chunks = score

    def rank(rows, cosines, ctx):
        candidates = pipeline._with_query_terms(
            [Candidate(dict(row), cosine) for row, cosine in zip(rows, cosines, strict=True)],
            ctx.query)
        pipeline.query_support(ctx.query, candidates, ctx.background.knows)
        if ctx.query.terms:
            pipeline.query_cohesion(ctx.query, candidates, ctx.background)
        score_chunks(candidates, ctx)
        files = rank_files(candidates, ctx.weights, ctx.floor, passages=ctx.semantic)
        for ranked in files[:10]:
            order_ranges(ranked.chunks, ctx.weights)
        return candidates, files

    digest = hashlib.sha256()
    for rows, cosines, ctx in kept:
        candidates, files = rank(rows, cosines, ctx)
        digest.update(repr([(c.row["id"], round(c.raw, 12), round(c.relevance, 12))
                            for c in candidates]).encode())
        digest.update(repr([(f.path, round(f.raw, 12), [c.row["id"] for c in f.chunks])
                            for f in files]).encode())
    gc.disable()  # (a collection in one round and not another is noise here)
    ms = []
    for _ in range(rounds):
        started = time.perf_counter()
        for rows, cosines, ctx in kept:
            rank(rows, cosines, ctx)
        ms.append((time.perf_counter() - started) / len(kept) * 1000)
    print(json.dumps({"code": str(Path(rag_lsp.__file__).parent.parent), "searches": len(kept),
                      "candidates": round(sum(len(k[0]) for k in kept) / len(kept), 1),
                      "digest": digest.hexdigest()[:16], "ms": ms}))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
              int(sys.argv[6]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True, help="a real index folder")
    parser.add_argument("--root", type=Path, required=True, help="the workspace of --index")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--queries", type=int, default=300, help="searches kept")
    parser.add_argument("--query-file", default="", help="one query a line (default: "
                        "server_latency.py's generated ones)")
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over them")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    codes = {"this tree": HERE.parent}
    if args.baseline:
        codes = {"baseline": args.baseline.resolve(), **codes}
    results = {}
    for name, code in codes.items():
        answer = run_child(str(Path(__file__).resolve()), code,
                           [str(args.index.resolve()), str(args.root.resolve()),
                            str(args.queries),
                            str(Path(args.query_file).resolve()) if args.query_file else "",
                            str(args.rounds)], args.root, 1800)
        results[name] = {key: answer[key] for key in ("searches", "candidates", "digest")}
        results[name].update(best_ms=round(min(answer["ms"]), 3),
                             ms=[round(m, 3) for m in answer["ms"]])
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {answer['searches']} searches, "
              f"{answer['candidates']} candidates each", file=sys.stderr, flush=True)
    print(f"\nranking after retrieval, ms a search ({args.rounds} passes; best)")
    for name, r in results.items():
        print(f"  {name:<10} {r['best_ms']:6.3f}   digest {r['digest']}   passes {r['ms']}")
    if len({r["digest"] for r in results.values()}) > 1:
        print("  the digests differ: the checkouts rank these searches differently")
    if args.json:
        print(json.dumps(results, indent=2))
    sys.path.insert(0, str(HERE))
    from codebench.engine import write_results
    write_results("ranking_cost", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
