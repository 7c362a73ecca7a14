"""The language server on a real repository: its first index, idle searches, and searches
during the re-index a branch switch sets off, with the server's memory throughout.

``server_latency.py`` measures on generated files, whose size and shape it controls. This
bench checks the same targets (search p95, the server's RSS while it indexes ~1,000 files,
time to a complete index) on a real tree: a benchmark repository's files at its pinned
revision (``--repo``, from its git mirror, under ``--paths``), or any folder (``--root``).

1. The server starts on a fresh index of the tree and indexes all of it; meanwhile a search
   every 0.3 s (what someone who opens a repository and searches at once sees: answers from
   what is indexed so far, marked partial).
2. Idle: every query once, back to back, once the server has been quiet for 5 s; then
   (since 2026-12-06) every query again with a question mark (new to the server's cache of
   query vectors, no new search word), 0.3 s apart as the searches during a run are: on
   this machine a search after a pause is slower than one back to back, indexing or not.
3. With ``--switch-to REV`` (``--repo`` only): the tree becomes ``REV``'s, as a ``git
   checkout`` would leave it (files written, removed), ``rag/reindex {}``, and a search every
   0.3 s until the run is over.

The queries are the code-retrieval benchmark's (every annotated query of its development
set, this repository's first) or one per line of ``--queries``. The server runs this
checkout's code, the real model and LanceDB, with the shared embedding cache off so that
the model's work is measured.

    .venv/bin/python bench/server_on_repo.py --repo vitest --paths packages docs \\
        --switch-to v4.1.0                                     # ~1,000 files, ~13 min
    .venv/bin/python bench/server_on_repo.py --root ~/src/project --queries questions.txt
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.data import (  # noqa: E402
    DEFAULT_DATA,
    DEFAULT_MIRRORS,
    find_mirror,
    load_repo_specs,
    sync_tree,
)
from server_latency import (  # noqa: E402
    RESULTS,
    SPACING_SECONDS,
    ServerUsage,
    Session,
    emit,
    log,
    search_alone,
    stats,
)

from rag_lsp.server.methods import RAG_REINDEX, RAG_STATUS  # noqa: E402


def benchmark_queries(data: Path, first: str | None) -> list[str]:
    """Every annotated query of the benchmark's development set, ``first``'s before the rest."""
    files = sorted((data / "annotations").glob("*.json"), key=lambda p: p.stem != first)
    if not files:
        raise SystemExit(f"no benchmark queries under {data / 'annotations'}: pass --data or "
                         "--queries FILE (one query per line)")
    return [item["query"] for f in files for item in json.loads(f.read_text("utf-8"))]


class Rounds:
    """The queries for searches while the server indexes, in rounds: each round's are
    ``query N`` with a new N, so that no search asks what one before it asked. The server
    keeps the vectors of the queries it has seen (512), and a repeated query would skip
    the model; the idle searches then ask each query as it is, for the first time (and,
    spaced out, with a question mark)."""

    def __init__(self, queries: list[str]):
        self.queries, self.asked = queries, 0

    def next(self) -> str:
        round_, at = divmod(self.asked, len(self.queries))
        self.asked += 1
        return f"{self.queries[at]} {round_ + 1}"


async def search_while_indexing(s: Session, rounds: Rounds, after: int) -> dict:
    """A search every SPACING_SECONDS until the folder is ready again (status
    notifications after ``after``)."""
    lsp, took, partial = [], [], 0
    while not any(st["state"] == "ready" for st in s.statuses[after:]):
        query = rounds.next()
        started = time.perf_counter()
        answer = await s.search(query)
        lsp.append((time.perf_counter() - started) * 1000)
        took.append(answer["tookMs"])
        partial += answer["partial"]
        await asyncio.sleep(SPACING_SECONDS)
    return {"lsp": stats(lsp, partial=partial), "server_took": stats(took)}


async def search_idle(s: Session, queries: list[str]) -> dict:
    for query in queries[:5]:  # the in-memory copies load on the first searches
        await s.search(query + " warm-up")
    await asyncio.sleep(5)
    return await search_alone(s, queries)


async def run(args: argparse.Namespace, root: Path, mirror: Path | None,
              queries: list[str]) -> dict:
    index = args.workdir / "index"
    shutil.rmtree(index, ignore_errors=True)
    out: dict = {"root": str(root)}
    rounds = Rounds(queries)
    s = Session(root, index, "visual-studio-code")
    log(f"the server indexes the whole tree; a search every {SPACING_SECONDS} s meanwhile")
    started = time.perf_counter()
    pid = await s.open()
    async with ServerUsage(pid) as usage:
        await s.wait_for("indexing", 0, timeout=120)
        out["first_index"] = await search_while_indexing(s, rounds, 0)
    status = await s.client.protocol.send_request_async(RAG_STATUS, None)
    folder = status["folders"][0]
    out["first_index"].update(usage.figures(), seconds=round(time.perf_counter() - started, 1),
                              files=folder["files"], chunks=folder["chunks"])
    log(f"{folder['files']} files, {folder['chunks']} chunks in "
        f"{out['first_index']['seconds']} s; idle searches, {len(queries)} queries")
    async with ServerUsage(pid) as usage:
        out["idle"] = await search_idle(s, queries)
    out["idle"].update(usage.figures())
    log(f"idle searches {SPACING_SECONDS} s apart, {len(queries)} queries")
    async with ServerUsage(pid) as usage:
        out["idle_spaced"] = await search_alone(s, [f"{q}?" for q in queries], spaced=True)
    out["idle_spaced"].update(usage.figures())
    if args.switch_to:
        assert mirror is not None
        switched = sync_tree(mirror, args.switch_to, args.paths, root)
        log(f"switched to {args.switch_to} ({switched['written']} files written, "
            f"{switched['removed']} removed); a search every {SPACING_SECONDS} s during "
            "rag/reindex {}")
        mark, started = len(s.statuses), time.perf_counter()
        await s.client.protocol.send_request_async(RAG_REINDEX, {})
        async with ServerUsage(pid) as usage:
            await s.wait_for("indexing", mark, timeout=60)
            out["switch"] = await search_while_indexing(s, rounds, mark)
        out["switch"].update(usage.figures(), **switched, to=args.switch_to,
                             seconds=round(time.perf_counter() - started, 1),
                             run=s.statuses[-1]["message"])
    await s.client.shutdown_session()
    return out


def print_table(r: dict) -> None:
    print(f"\n{r['root']}: {r['first_index']['files']} files, {r['first_index']['chunks']} "
          f"chunks, indexed in {r['first_index']['seconds']} s")
    print(f"{'rag/search round trip (tookMs)':<40} {'n':>4} {'p50 ms':>13} {'p95 ms':>13} "
          f"{'p99 ms':>13} {'server RSS peak':>16}")
    phases = [("during the first index", "first_index"), ("idle, back to back", "idle"),
              (f"idle, {SPACING_SECONDS} s apart", "idle_spaced")]
    if "switch" in r:
        phases.append((f"during the switch to {r['switch']['to']}", "switch"))
    for label, key in phases:
        if key not in r:  # (no spaced idle phase before 2026-12-06)
            continue
        lsp, took = r[key]["lsp"], r[key]["server_took"]
        cells = "".join(f" {lsp.get(q, 0):>6.1f} ({took.get(q, 0):>4.1f})"
                        for q in ("p50_ms", "p95_ms", "p99_ms"))
        print(f"{label:<40} {lsp['n']:>4}{cells} {r[key]['server_peak_rss_mb']:>13} MB")
    if "switch" in r:
        print(f"switch: {r['switch']['written']} files written, {r['switch']['removed']} "
              f"removed; {r['switch']['run']}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--repo", help="a benchmark repository (repos.json), at its pinned "
                                      "revision unless --revision")
    where.add_argument("--root", type=Path, help="any folder to index (left as it is)")
    parser.add_argument("--paths", nargs="*", default=[],
                        help="with --repo: only these folders of it (default: all of it)")
    parser.add_argument("--revision", help="with --repo: this revision instead of the pinned one")
    parser.add_argument("--switch-to", metavar="REV",
                        help="with --repo: then switch the tree to REV and search during the "
                             "re-index")
    parser.add_argument("--queries", type=Path, help="one query per line (default: the "
                                                     "benchmark's annotated queries)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="benchmark data folder (annotations/, repos.json)")
    parser.add_argument("--mirrors", type=Path, default=DEFAULT_MIRRORS,
                        help="folder of bare git mirrors (owner+name/repo or name.git)")
    parser.add_argument("--workdir", type=Path,
                        help="the tree (with --repo) and the index go here (default: a "
                             "temporary folder, removed after)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", type=Path, default=RESULTS / "server_on_repo.json")
    args = parser.parse_args()
    if args.root and (args.switch_to or args.revision or args.paths):
        parser.error("--paths, --revision and --switch-to go with --repo")
    if args.root and not args.root.is_dir():
        parser.error(f"--root {args.root} is not a folder")
    if args.queries:
        queries = [q.strip() for q in args.queries.read_text("utf-8").splitlines() if q.strip()]
        if not queries:
            parser.error(f"--queries {args.queries} holds no query")
    else:
        queries = benchmark_queries(args.data, args.repo)
    with tempfile.TemporaryDirectory(prefix="server-on-repo-") as tmp:
        args.workdir = (args.workdir or Path(tmp)).resolve()
        mirror = None
        if args.repo:
            specs = load_repo_specs(args.data)
            if args.repo not in specs:
                parser.error(f"--repo {args.repo}: not in {args.data / 'repos.json'} "
                             f"(known: {', '.join(sorted(specs))})")
            spec = specs[args.repo]
            mirror = find_mirror(args.mirrors, spec)
            root = args.workdir / "ws"
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            made = sync_tree(mirror, args.revision or spec.revision, args.paths, root)
            log(f"{args.repo} at {(args.revision or spec.revision)[:12]}: {made['written']} "
                f"files ({made['missing']} not in the mirror)")
        else:
            root = args.root.resolve()
        result = asyncio.run(run(args, root, mirror, queries))
        emit(result, args, print_table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
