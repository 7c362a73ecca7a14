"""What a search costs while deleted folders are drafted: their chunks stay in the index until
their update lands, a search sets them aside as it finds them, and a retriever whose
candidates were more than a quarter theirs asks the index again for more
(``pipeline._visible_rows``).

Works on a copy (``cp -a``) of a ``server_latency.py`` workdir (at 100k chunks, the one its
``--stand-in-vectors`` builds): opens the workspace as the server does, answers ``--warm``
searches, then the same ``--queries`` hybrid searches three times: with nothing drafted, with
one package folder deleted (moved out of the workspace and drafted, as the server does for a
file event), and with half of the packages deleted. For each: p50 / p95 ms, the candidates a
retriever kept on average (and what its first query alone left, all a search had before the
thirty-eighth session), and how many retrievers asked again. The folders are moved back at the
end. (Candidates, not results: the stand-in index's vectors are drawn at random, so its
searches' answers mean little.)

    .venv/bin/python bench/hidden_refetch.py --workdir /tmp/bench/lat100k-copy
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from pathlib import Path

from bench_basics import pct, workdir_problem

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_lsp import memory  # noqa: E402

memory.set_up_process()  # as `rag-lsp` does, before any library starts a thread

from server_latency import make_queries, open_copied_workdir  # noqa: E402

from rag_lsp.search import pipeline  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="a copy of a server_latency.py workdir (its folders are moved)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--warm", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    problem = workdir_problem(args.workdir)
    if problem:
        raise SystemExit(problem)
    ws = open_copied_workdir(args.workdir)
    packages = sorted(p.name for p in (args.workdir / "ws").iterdir() if p.is_dir())
    aside = args.workdir / "deleted"
    aside.mkdir(exist_ok=True)
    calls = {"retrievers": 0, "asked_again": 0, "kept": 0, "kept_at_first": 0}
    counting = threading.Lock()  # the full-text retrievers run on the search's own threads
    real_visible = pipeline._visible_rows  # noqa: SLF001

    def counted(fetch, limit, shown, lost):
        asked = []

        def fetched(n):
            rows = fetch(n)
            if not asked:  # what the first query alone left (all a search had before)
                with counting:
                    calls["kept_at_first"] += sum(shown(row) is not None for row in rows)
            asked.append(n)
            return rows

        rows = real_visible(fetched, limit, shown, lost)
        with counting:
            calls["retrievers"] += 1
            calls["asked_again"] += len(asked) > 1
            calls["kept"] += len(rows)
        return rows

    pipeline._visible_rows = counted  # noqa: SLF001
    for query in make_queries(args.warm, seed=11):
        ws.search(query)
    queries = make_queries(args.queries, seed=12)
    figures = {}
    scenarios = (("nothing drafted", []), ("one package deleted", packages[:1]),
                 (f"{len(packages) // 2} of {len(packages)} packages deleted",
                  packages[: len(packages) // 2]))
    try:
        for name, gone in scenarios:
            moved = [p for p in gone if (args.workdir / "ws" / p).exists()]
            for package in moved:
                shutil.move(args.workdir / "ws" / package, aside / package)
            ws.draft_saved(moved)
            calls.update(retrievers=0, asked_again=0, kept=0, kept_at_first=0)
            took = []
            for query in queries:
                start = time.perf_counter()
                ws.search(query)
                took.append((time.perf_counter() - start) * 1000)
            retrievers = max(1, calls["retrievers"])
            figures[name] = {"p50_ms": pct(took, 0.5), "p95_ms": pct(took, 0.95),
                             "candidates": round(calls["kept"] / retrievers, 1),
                             "candidates_first_query": round(calls["kept_at_first"]
                                                             / retrievers, 1),
                             "retrievers_asked_again": f"{calls['asked_again']} of "
                                                       f"{calls['retrievers']}"}
    finally:
        for package in packages:
            if (aside / package).exists():
                shutil.move(aside / package, args.workdir / "ws" / package)
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    for name, f in figures.items():
        print(f"{name:32s} p50 {f['p50_ms']:6.1f} ms  p95 {f['p95_ms']:6.1f} ms  "
              f"candidates {f['candidates']:5.1f} "
              f"(first query alone {f['candidates_first_query']:5.1f})"
              f"  asked again {f['retrievers_asked_again']}")


if __name__ == "__main__":
    main()
