"""How well a search ranks files just saved, before their update lands, on Semble's benchmark.

A save is drafted at once (its new words searchable) and its update may wait behind another
write: tens of seconds behind a compaction that trains the ANN index at 100k chunks, minutes
behind a branch switch's run. Meanwhile a search reads the draft instead of the file's stored
chunks, which are of its old text. This bench asks how much that costs the ranking.

For each query of each repository, every file that answers it (its targets) is saved with one
blank line inserted halfway down, a change of no word, and drafted as the language server
drafts a burst of saves (``Workspace.draft_saved``); the query is searched (hybrid, default
settings), and the files are written back as they were and their update run (which only
touches them). Three passes over the queries, one after the other in one process:

- ``nothing saved``: the index as it is (what a search finds once the update has landed);
- ``saved, words alone``: drafted as before the thirty-ninth session, without the stored
  chunks: every stored chunk of a saved file set aside, the whole file drafted as windows;
- ``saved, unchanged chunks kept``: as drafts are made now, the stored chunks whose text the
  file still holds kept, with their vectors, at the lines they are at now.

NDCG@10, Hit@1 and MRR per repository and overall, the searches' p50 and the drafting's p50
(which now reads the saved files' stored chunks).

    .venv/bin/python bench/saved_rankings.py --repo cobra --repo model2vec
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.data import annotated_repos, load_repo_specs, load_tasks  # noqa: E402
from codebench.engine import (  # noqa: E402
    benchmark_parser,
    benchmark_workspace,
    indexed_paths,
    parse_overrides,
    search_files,
    with_settings,
    write_results,
)
from codebench.scoring import existing_targets, macro, path_matches, score_query, summarise  # noqa: E402

from rag_lsp.workspace import Workspace  # noqa: E402

PASSES = ("nothing saved", "saved, words alone", "saved, unchanged chunks kept")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return benchmark_parser(__doc__).parse_args(argv)


def with_blank_line(text: str) -> str:
    """``text`` with one empty line inserted halfway down (no word changed)."""
    lines = text.split("\n")
    half = len(lines) // 2
    return "\n".join([*lines[:half], "", *lines[half:]])


def kept_share(ws: Workspace, paths: list[str]) -> tuple[int, int]:
    """Of these saved files' stored chunks, how many their drafts keep, and how many there
    are."""
    stored = ws._stored_chunks(paths)  # noqa: SLF001 (what the drafts were given)
    kept = sum(ws._draft.kept_chunks(path) for path in paths)  # noqa: SLF001
    return kept, sum(len(rows) for rows in stored.values())


@contextmanager
def saved(ws: Workspace, paths: list[str]) -> Iterator[float]:
    """``paths`` saved with a blank line more and drafted (yields the drafting's ms); written
    back as they were and updated after."""
    originals = {path: (ws.root / path).read_bytes() for path in paths}
    try:
        for path, data in originals.items():
            text = data.decode("utf-8", "surrogateescape")  # (any bytes, written back as read)
            (ws.root / path).write_bytes(with_blank_line(text).encode("utf-8", "surrogateescape"))
        started = time.perf_counter()
        ws.draft_saved(paths)
        yield (time.perf_counter() - started) * 1000
    finally:
        for path, data in originals.items():
            (ws.root / path).write_bytes(data)
        ws.update(paths)  # the same bytes again: touched, and the drafts go


@contextmanager
def drafting(label: str) -> Iterator[None]:
    """Drafts as ``label`` makes them: words alone is a draft without the stored chunks."""
    if label == "saved, words alone":
        with mock.patch.object(Workspace, "_stored_chunks", lambda self, paths: {}):
            yield
    else:
        yield


def target_files(task, paths: list[str]) -> list[str]:
    return sorted({p for t in task.targets for p in paths if path_matches(p, t.path)})


def run_repo(ws: Workspace, tasks, label: str, threshold: float | None,
             note: Callable[[str], None]) -> dict:
    paths = indexed_paths(ws)
    scores, search_ms, draft_ms = [], [], []
    kept = stored = 0
    for task in tasks:
        targets = target_files(task, paths)
        if label == "nothing saved" or not targets:
            results, ms = search_files(ws, task.query, threshold=threshold)
        else:
            with drafting(label), saved(ws, targets) as took:
                draft_ms.append(took)
                results, ms = search_files(ws, task.query, threshold=threshold)
                if label == PASSES[-1]:
                    counts = kept_share(ws, targets)
                    kept, stored = kept + counts[0], stored + counts[1]
        search_ms.append(ms)
        scores.append(score_query(task, results, existing_targets(task.targets, paths), ms))
    note(f"{label}: {len(scores)} queries"
         + (f", {kept:,} of {stored:,} stored chunks of the saved files kept" if stored else ""))
    return {"scores": scores, "search_ms": search_ms, "draft_ms": draft_ms,
            "kept": kept, "stored": stored}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ablate:
        raise SystemExit("--ablate is code_retrieval.py's: this bench runs one set of settings "
                         "(--set and --threshold choose it)")
    specs = load_repo_specs(args.data)
    repos = args.repo or annotated_repos(args.data)
    runs: dict[str, dict[str, dict]] = {label: {} for label in PASSES}
    for repo in repos:
        ws = with_settings(benchmark_workspace(repo, args), parse_overrides(args.set))
        tasks = load_tasks(args.data, repo, specs[repo])
        for label in PASSES:
            runs[label][repo] = run_repo(ws, tasks, label, args.threshold,
                                         lambda text, r=repo: print(f"{r}: {text}",
                                                                    file=sys.stderr))
    summary = {}
    print(f"\n{'':<32}" + "".join(f"{r[:10]:>11}" for r in repos)
          + f"{'NDCG@10':>9}{'Hit@1':>7}{'MRR':>7}{'search p50':>12}{'draft p50':>11}")
    for label in PASSES:
        per_repo = {repo: summarise(runs[label][repo]["scores"]) for repo in repos}
        overall = macro(per_repo)
        search_ms = [ms for run in runs[label].values() for ms in run["search_ms"]]
        draft_ms = [ms for run in runs[label].values() for ms in run["draft_ms"]]
        draft_p50 = statistics.median(draft_ms) if draft_ms else None
        drafting = f"{draft_p50:>9.1f}ms" if draft_p50 is not None else f"{'—':>11}"
        print(f"{label:<32}" + "".join(f"{per_repo[r].ndcg10:>11.3f}" for r in repos)
              + f"{overall.ndcg10:>9.3f}{overall.hit1:>7.3f}{overall.mrr:>7.3f}"
              f"{statistics.median(search_ms):>10.1f}ms{drafting}")
        summary[label] = {"ndcg10": overall.ndcg10, "hit1": overall.hit1, "mrr": overall.mrr,
                          "per_repo": {r: s.ndcg10 for r, s in per_repo.items()},
                          "search_p50_ms": statistics.median(search_ms),
                          "draft_p50_ms": draft_p50,
                          "stored_chunks_kept": sum(run["kept"] for run in runs[label].values()),
                          "stored_chunks": sum(run["stored"] for run in runs[label].values())}
    write_results("saved_rankings", {"runs": summary, "repos": repos}, print_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
