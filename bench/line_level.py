"""Line-level retrieval: does the first range shown in the right file answer the question?

Our own question set (``bench/data/line_level/*.json``): questions written by reading two of
the benchmark's repositories (fastapi, Python; gin, Go), each with one gold file and line
range. For every question: is the gold file in the top 10 (and first), and does that file's
first range — the one an editor opens — overlap the gold lines. Default settings.

    .venv/bin/python bench/line_level.py
    .venv/bin/python bench/line_level.py --ablate      # each ranking rule off
    .venv/bin/python bench/line_level.py -v            # every miss
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
    variants,
    with_settings,
    write_results,
)
from codebench.scoring import path_matches  # noqa: E402

QUESTIONS = Path(__file__).resolve().parent / "data" / "line_level"


def load_questions(folder: Path = QUESTIONS) -> list[dict]:
    questions = []
    for path in sorted(folder.glob("*.json")):
        questions.extend(json.loads(path.read_text(encoding="utf-8")))
    return questions


def judge(ws, question: dict, threshold: float | None) -> dict:
    """Where the gold file ranks, and whether its first range overlaps the gold lines."""
    results = ws.search(question["query"], top_k=10, threshold=threshold).results
    for rank, result in enumerate(results, start=1):
        if path_matches(result.path, question["path"]):
            first = result.ranges[0]
            overlap = not (first.end_line < question["start_line"]
                           or first.start_line > question["end_line"])
            return {"rank": rank, "first_range": [first.start_line, first.end_line],
                    "overlap": overlap}
    return {"rank": None, "first_range": None, "overlap": False}


def summarise(judged: list[dict]) -> dict:
    found = [j for j in judged if j["rank"]]
    return {
        "questions": len(judged),
        "file_found": len(found) / len(judged),
        "file_first": sum(1 for j in found if j["rank"] == 1) / len(judged),
        "first_range_overlaps": sum(1 for j in found if j["overlap"]) / max(1, len(found)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_options(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every miss")
    args = parser.parse_args(argv)
    questions = load_questions()
    by_repo: dict[str, list[dict]] = {}
    for q in questions:
        by_repo.setdefault(q["repo"], []).append(q)
    workspaces = {repo: benchmark_workspace(repo, args) for repo in by_repo}
    out = {}
    print(f"{'':<32}{'questions':>10}{'file@10':>9}{'file@1':>9}{'1st range':>10}")
    for label, overrides in variants(args).items():
        judged_all = []
        for repo, qs in by_repo.items():
            ws = with_settings(workspaces[repo], overrides)
            for q in qs:
                judged = {**q, **judge(ws, q, args.threshold)}
                judged_all.append(judged)
                if args.verbose and label == "default" and not judged["overlap"]:
                    print(f"  miss [{repo}] {q['query'][:70]!r}: gold {q['path']}:"
                          f"{q['start_line']}-{q['end_line']}, rank {judged['rank']}, "
                          f"first range {judged['first_range']}", file=sys.stderr)
        figures = summarise(judged_all)
        out[label] = figures
        print(f"{label:<32}{figures['questions']:>10}{figures['file_found']:>9.3f}"
              f"{figures['file_first']:>9.3f}{figures['first_range_overlaps']:>10.3f}")
    write_results("line_level", {"runs": out, "settings": variants(args)["default"]},
                  print_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
