"""Documentation questions still find documentation, although docs rank below code.

Our own set (``bench/data/doc_questions.json``): questions whose answer is one documentation
file, over cobra, gin and axum (benchmark repositories with docs in their tree) and this
project. Reports, with default settings and with the docs prior switched off, how often the
gold file is first, in the top 3 and in the top 10, and the mean reciprocal rank.

    .venv/bin/python bench/doc_questions.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.engine import (  # noqa: E402
    add_common_options,
    benchmark_workspace,
    parse_overrides,
    with_settings,
    write_results,
)
from codebench.scoring import path_matches  # noqa: E402

QUESTIONS = Path(__file__).resolve().parent / "data" / "doc_questions.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_options(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every miss")
    args = parser.parse_args(argv)
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    base = parse_overrides(args.set)
    runs = {"default": base, "docs prior off": {**base, "rankDocsPrior": 1.0}}
    workspaces = {repo: benchmark_workspace(repo, args) for repo in {q["repo"] for q in questions}}
    out = {}
    print(f"{'':<18}{'questions':>10}{'first':>8}{'top 3':>8}{'top 10':>8}{'MRR':>8}")
    for label, overrides in runs.items():
        ranks = []
        for q in questions:
            ws = with_settings(workspaces[q["repo"]], overrides)
            results = ws.search(q["query"], top_k=10, threshold=args.threshold).results
            rank = next((i for i, r in enumerate(results, 1) if path_matches(r.path, q["path"])),
                        None)
            ranks.append(rank)
            if args.verbose and label == "default" and rank != 1:
                print(f"  [{q['repo']}] rank {rank}: {q['query']!r} -> {q['path']}; got "
                      f"{[r.path for r in results[:3]]}", file=sys.stderr)
        n = len(ranks)
        figures = {"questions": n,
                   "first": sum(1 for r in ranks if r == 1) / n,
                   "top3": sum(1 for r in ranks if r and r <= 3) / n,
                   "top10": sum(1 for r in ranks if r) / n,
                   "mrr": sum(1 / r for r in ranks if r) / n}
        out[label] = figures
        print(f"{label:<18}{n:>10}{figures['first']:>8.3f}{figures['top3']:>8.3f}"
              f"{figures['top10']:>8.3f}{figures['mrr']:>8.3f}")
    write_results("doc_questions", out, print_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
