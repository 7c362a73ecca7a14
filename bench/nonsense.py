"""Nothing relevant, nothing returned: how often nonsense and off-topic questions get results.

Queries: off-topic questions (cooking, sport, travel…) from ``bench/data/offtopic_queries.txt``
(the set the ranking was tuned on) or, with ``--queries``, another file such as
``bench/data/offtopic_heldout.txt`` (never tuned on: the honest figure), and generated
strings of four random letter groups (seeded), asked in each benchmark repository and in this
project (without its bench/ and tests/ folders, which hold these very questions). For each
threshold it prints the share of queries that return any result from ``Workspace.search``
(the default threshold is the one that matters), and it checks that mode context
(``rag-lsp context``'s engine, ``build_context``) injects nothing.

    .venv/bin/python bench/nonsense.py
    .venv/bin/python bench/nonsense.py --queries bench/data/offtopic_heldout.txt
    .venv/bin/python bench/nonsense.py --thresholds 0.1,0.2,0.3 -v
"""

from __future__ import annotations

import argparse
import random
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.data import annotated_repos  # noqa: E402
from codebench.engine import (  # noqa: E402
    PROJECT,
    add_common_options,
    benchmark_workspace,
    parse_overrides,
    with_settings,
    write_results,
)

from rag_lsp.config import Settings  # noqa: E402
from rag_lsp.context.builder import ContextRequest, Source, build_context  # noqa: E402

OFF_TOPIC = Path(__file__).resolve().parent / "data" / "offtopic_queries.txt"


def off_topic_queries(path: Path = OFF_TOPIC) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def random_queries(count: int, seed: int = 7) -> list[str]:
    """``count`` queries of four random lower-case letter groups of 3 to 9 letters."""
    rng = random.Random(seed)
    return [" ".join("".join(rng.choice(string.ascii_lowercase)
                             for _ in range(rng.randint(3, 9))) for _ in range(4))
            for _ in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_options(parser)
    parser.add_argument("--queries", type=Path, default=OFF_TOPIC,
                        help="file of off-topic questions, one per line (default: the tuning "
                             "set; bench/data/offtopic_heldout.txt was never tuned on)")
    parser.add_argument("--random", type=int, default=50, help="random queries (default 50)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the random queries")
    parser.add_argument("--thresholds", default="0.1,0.15,0.2,0.25,0.3",
                        help="comma-separated thresholds to report besides the default")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print the queries that got results at the default threshold")
    args = parser.parse_args(argv)
    overrides = parse_overrides(args.set)
    queries = [("off-topic", q) for q in off_topic_queries(args.queries)] + [
        ("random", q) for q in random_queries(args.random, args.seed)]
    repos = [*annotated_repos(args.data), PROJECT]
    default = args.threshold if args.threshold is not None else Settings.from_dict(
        {**Settings().to_dict(), **overrides}).threshold
    thresholds = sorted({float(t) for t in args.thresholds.split(",")} | {default})
    answered: dict[float, list[tuple[str, str, str, float, str]]] = {t: [] for t in thresholds}
    injected = searches = 0
    for repo in repos:
        ws = with_settings(benchmark_workspace(repo, args), overrides)
        for kind, query in queries:
            searches += 1
            for threshold in thresholds:  # priors respect the threshold: search at each one
                results = ws.search(query, threshold=threshold, top_k=1).results
                if results:
                    answered[threshold].append((kind, repo, query, results[0].score,
                                                results[0].path))
            request = ContextRequest(mode="debugger", token_budget=2000, query=query,
                                     include_knowledge=False)
            context_ws = with_settings(ws, {"threshold": default})
            if build_context([Source(context_ws)], request, context_ws.token_counter).items:
                injected += 1
    counts = {kind: sum(1 for k, _ in queries if k == kind) * len(repos)
              for kind in ("off-topic", "random")}
    out = {"query_file": str(args.queries), "queries": len(queries), "workspaces": len(repos),
           "default_threshold": default, "context_injected": injected / searches,
           "by_threshold": {}}
    print(f"{len(queries)} queries x {len(repos)} workspaces = {searches} searches")
    print(f"{'threshold':>10}{'any result':>12}{'off-topic':>11}{'random':>9}")
    for threshold in thresholds:
        hits = answered[threshold]
        figures = {"any": len(hits) / searches,
                   "off_topic": sum(1 for h in hits if h[0] == "off-topic") / counts["off-topic"],
                   "random": sum(1 for h in hits if h[0] == "random") / counts["random"]}
        out["by_threshold"][str(threshold)] = figures
        marker = "  <- default" if threshold == default else ""
        print(f"{threshold:>10.2f}{figures['any']:>12.3f}{figures['off_topic']:>11.3f}"
              f"{figures['random']:>9.3f}{marker}")
    print(f"context injected for {out['context_injected']:.3f} of the searches "
          "(default threshold)")
    leaks = sorted(answered[default], key=lambda h: -h[3])
    out["leaks"] = [{"kind": h[0], "repo": h[1], "query": h[2], "score": round(h[3], 3),
                     "path": h[4]} for h in leaks]
    if args.verbose:
        for leak in out["leaks"]:
            print(f"  {leak['score']:.3f} [{leak['repo']}] {leak['query']!r} -> {leak['path']}",
                  file=sys.stderr)
    write_results("nonsense", out, print_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
