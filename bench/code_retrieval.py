"""Code-retrieval quality on Semble's public benchmark (development set), file-level NDCG@10.

Each annotated repository's pinned ``benchmark_root`` is extracted from a local git mirror into
``bench/cache/`` (git-ignored), indexed once with the real engine (the index is kept there and
updated incrementally), and every query is searched through ``Workspace.search`` with default
settings. Figures print per repository, per category and per language beside the published
figures of Semble and other tools, with Hit@1, MRR and search latency.

    .venv/bin/python bench/code_retrieval.py                      # hybrid, 10 repositories
    .venv/bin/python bench/code_retrieval.py --mode all           # vector, lexical, hybrid
    .venv/bin/python bench/code_retrieval.py --threshold 0        # what the threshold costs
    .venv/bin/python bench/code_retrieval.py --baseline ripgrep   # check the scorer
    .venv/bin/python bench/code_retrieval.py --ablate             # each ranking rule off
    .venv/bin/python bench/code_retrieval.py --repo axum -v       # one repository, per query
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.data import (  # noqa: E402
    CATEGORIES,
    annotated_repos,
    load_published,
    load_repo_specs,
    load_tasks,
    source_tree,
)
from codebench.engine import (  # noqa: E402
    benchmark_parser,
    benchmark_workspace,
    indexed_paths,
    search_files,
    variants,
    with_settings,
    write_results,
)
from codebench.ripgrep import ripgrep_files  # noqa: E402
from codebench.scoring import (  # noqa: E402
    existing_targets,
    macro,
    mean,
    percentile,
    score_query,
    summarise,
)

PUBLISHED_COLUMNS = (("semble-hybrid", "Semble"), ("coderankembed-hybrid", "CRE hyb"),
                     ("colgrep", "ColGREP"), ("semble-bm25-raw", "BM25"),
                     ("ripgrep", "rg"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--mode", default="hybrid",
                        choices=("hybrid", "vector", "lexical", "all"))
    parser.add_argument("--baseline", choices=("ripgrep",), help="score a baseline instead")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every query")
    return parser.parse_args(argv)


def run_repo(ws, tasks, mode: str, threshold: float | None, verbose: bool):
    paths = indexed_paths(ws)
    scores = []
    for task in tasks:
        results, ms = search_files(ws, task.query, mode=mode, threshold=threshold)
        score = score_query(task, results, existing_targets(task.targets, paths), ms)
        scores.append(score)
        if verbose:
            print(f"  [{task.category[:4]}] {score.ndcg10:.3f} ranks={score.ranks} "
                  f"{task.query!r}\n      targets {[t.path for t in task.targets]}\n"
                  f"      top {score.top[:5]}", file=sys.stderr)
    return scores


def run_ripgrep(tree: Path, tasks, verbose: bool):
    paths = [p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()]
    scores = []
    for task in tasks:
        results = ripgrep_files(task.query, tree)
        scores.append(score_query(task, results, existing_targets(task.targets, paths)))
        if verbose:
            print(f"  {scores[-1].ndcg10:.3f} {task.query!r} top {scores[-1].top[:3]}",
                  file=sys.stderr)
    return scores


def print_table(title: str, rows: dict[str, dict[str, float]], columns: list[str]) -> None:
    width = max([len(title)] + [len(r) for r in rows]) + 2
    widths = {c: max(9, len(c) + 2) for c in columns}  # long ablation labels stay apart
    print(f"\n{title:<{width}}" + "".join(f"{c:>{widths[c]}}" for c in columns))
    for name, values in rows.items():
        cells = "".join(f"{values[c]:>{widths[c]}.3f}" if isinstance(values.get(c), float)
                        and values[c] == values[c] else f"{'—':>{widths[c]}}" for c in columns)
        print(f"{name:<{width}}{cells}")


def report(label_runs: dict[str, dict], specs, published: dict) -> dict:
    """Print per-repo / category / language tables; return the summary for JSON."""
    labels = list(label_runs)
    repos = sorted({r for run in label_runs.values() for r in run})
    summaries = {label: {repo: summarise(run[repo]) for repo in run}
                 for label, run in label_runs.items()}
    pub = {col: published.get(key, {}).get("per_repo", {}) for key, col in PUBLISHED_COLUMNS}
    columns = labels + [col for _key, col in PUBLISHED_COLUMNS]

    def published_mean(col, members):
        values = [pub[col][r]["ndcg10"] for r in members if r in pub[col]]
        return mean(values) if len(values) == len(members) else float("nan")

    overall = {label: macro(summaries[label]) for label in labels}
    rows = {}
    for repo in repos:
        row = {label: summaries[label][repo].ndcg10 for label in labels
               if repo in summaries[label]}
        row.update({col: pub[col][repo]["ndcg10"] for col in pub if repo in pub[col]})
        rows[f"{repo} ({specs[repo].language})"] = row
    rows["MEAN"] = {label: overall[label].ndcg10 for label in labels}
    rows["MEAN"].update({col: published_mean(col, repos) for col in pub})
    print_table("NDCG@10 per repository", rows, columns)

    cat_rows = {}
    for category in CATEGORIES:
        row = {label: overall[label].by_category.get(category, float("nan"))
               for label in labels}
        for col in pub:
            have = [r for r in repos if category in pub[col].get(r, {}).get("by_category", {})]
            row[col] = (mean(pub[col][r]["by_category"][category] for r in have)
                        if have else float("nan"))
        cat_rows[category] = row
    print_table("NDCG@10 per category", cat_rows, columns)

    lang_rows = {}
    for language in sorted({specs[r].language for r in repos}):
        members = [r for r in repos if specs[r].language == language]
        row = {label: mean(summaries[label][r].ndcg10 for r in members if r in summaries[label])
               for label in labels}
        row.update({col: published_mean(col, members) for col in pub})
        lang_rows[f"{language} ({len(members)})"] = row
    print_table("NDCG@10 per language", lang_rows, columns)

    print(f"\n{'':<32}{'Hit@1':>9}{'MRR':>9}{'p50 ms':>9}{'p95 ms':>9}{'queries':>9}")
    for label in labels:
        times = [s.ms for run in label_runs[label].values() for s in run]
        print(f"{label:<32}{overall[label].hit1:>9.3f}{overall[label].mrr:>9.3f}"
              f"{percentile(times, 50):>9.1f}{percentile(times, 95):>9.1f}"
              f"{overall[label].queries:>9}")
    return {label: {"ndcg10": overall[label].ndcg10, "hit1": overall[label].hit1,
                    "mrr": overall[label].mrr, "by_category": overall[label].by_category,
                    "per_repo": {r: s.ndcg10 for r, s in summaries[label].items()},
                    "p50_ms": percentile([s.ms for run in label_runs[label].values()
                                          for s in run], 50)}
            for label in labels}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    specs = load_repo_specs(args.data)
    repos = args.repo or annotated_repos(args.data)
    modes = ("vector", "lexical", "hybrid") if args.mode == "all" else (args.mode,)
    runs: dict[str, dict] = {}
    for repo in repos:
        tasks = load_tasks(args.data, repo, specs[repo])
        if args.baseline == "ripgrep":
            tree = source_tree(specs[repo], args.mirrors, args.cache)
            runs.setdefault("rg (ours)", {})[repo] = run_ripgrep(tree, tasks, args.verbose)
            continue
        ws = benchmark_workspace(repo, args)
        for label, overrides in variants(args).items():
            searched = with_settings(ws, overrides)
            for mode in modes:
                name = mode if label == "default" else label
                if args.verbose:
                    print(f"--- {repo} {name}", file=sys.stderr)
                runs.setdefault(name, {})[repo] = run_repo(
                    searched, tasks, mode, args.threshold, args.verbose and label == "default")
    summary = report(runs, specs, published=load_published(args.data))
    out = {"runs": summary, "settings": variants(args)["default"], "threshold": args.threshold}
    write_results("code_retrieval_ripgrep" if args.baseline else "code_retrieval", out,
                  print_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
