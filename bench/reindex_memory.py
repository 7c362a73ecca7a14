"""Where a re-index's memory goes: the RSS peak of each store step while a workspace indexes a
share of its files again, in this process.

Works on a workdir of ``server_latency.py`` (``ws/`` and ``index/``; at 100k chunks, the one
its ``--stand-in-vectors`` builds), copied first (``cp -a``) so that the original stays as it
was. Opens the workspace as the server does (the allocators set up as the ``rag-lsp`` command
sets them, the index at the name the server gives it), answers ``--searches`` queries so that
what a serving process holds is loaded, rewrites ``--rewrite`` of the files with new content
and runs ``Workspace.index()``. The new chunks get stand-in vectors (drawn from a hash of each
chunk's text, as ``server_latency.py --stand-in-vectors`` does; the shared embedding cache is
off so none reaches it): in the server the model runs in a child process, so its vectors
change nothing this process holds, and the run takes seconds instead of minutes. RSS is
sampled every 5 ms and each sample is put to the store step running then (the innermost
one): the replace of a batch of files, the full-text index check, ``optimize``, its
compactions and the ANN index's training; "other" is the rest of the run (reading, chunking).
"PSS with children" is the proportional set size of this process and its children at the same
moment, sampled every 25 ms: what the machine holds for them, each page shared between them
(libraries both map) counted once (since the thirty-sixth session the training and the
compaction after it run in a child; a child's ``ru_maxrss`` would not do, it counts the
parent's pages it shares right after the fork). ``--runs N``
re-indexes N times, other files each time: each ``optimize`` that folds new rows into the ANN
index adds a segment to it, and past four the index is trained again (at 100k
chunks the second run of a server's re-indexes got there). ``--search-every S`` searches from
a thread every S seconds during the runs, as a server's user would (what the searches read
is put to the step running then).

    .venv/bin/python bench/reindex_memory.py --workdir /tmp/bench/lat100k
    .venv/bin/python bench/reindex_memory.py --workdir /tmp/bench/lat100k --runs 2 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_basics import pss_with_children_mb
from index_workspace import RssSampler

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_lsp import memory  # noqa: E402

memory.set_up_process()  # as `rag-lsp` does, before any library starts a thread

from server_latency import (  # noqa: E402
    RESULTS,
    make_queries,
    open_copied_workdir,
    rewrite,
    stand_in_vectors,
    workdir_problem,
)

from rag_lsp.store import lance_store  # noqa: E402
from rag_lsp.store.lance_store import ChunkStore  # noqa: E402

# The store steps whose memory is told apart: (object, attribute, label).
STEPS = ((ChunkStore, "replace_files", "replace_files"),
         (ChunkStore, "touch_files", "touch_files"),
         (ChunkStore, "remove_files", "remove_files"),
         (ChunkStore, "ensure_fts_index", "ensure_fts_index"),
         (ChunkStore, "optimize", "optimize (outside its compactions)"),
         (ChunkStore, "_compact", "a compaction"),
         (lance_store, "build_vector_index", "ANN index training"),
         # since the thirty-sixth session the training and the compaction after it run in a
         # child process, which this step stands for (a checkout before it has no such step)
         (ChunkStore, "_train_and_compact", "ANN index training and compaction (child)"),
         (ChunkStore, "_fit_caches", "connecting again (new caches)"),
         (ChunkStore, "_warm_caches", "warming the new caches"))


PSS_EVERY_SAMPLES = 5


def rss_mb() -> float:
    return RssSampler.current_kb() / 1024


class StepMemory:
    """RSS samples put to the store step running when each was taken."""

    def __init__(self) -> None:
        self.running = ["other"]
        self.steps: dict[str, dict] = {}
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _step(self, label: str) -> dict:
        return self.steps.setdefault(label, {"calls": 0, "start_mb": [], "peak_mb": 0.0,
                                             "pss_with_children_peak_mb": 0.0})

    def _sample(self) -> None:
        samples = 0
        while not self._done.is_set():
            step = self._step(self.running[-1])
            step["peak_mb"] = max(step["peak_mb"], rss_mb())
            if samples % PSS_EVERY_SAMPLES == 0:  # ~1 ms a read at 400 MB: less often
                step["pss_with_children_peak_mb"] = max(step["pss_with_children_peak_mb"],
                                                        pss_with_children_mb())
            samples += 1
            self._done.wait(0.005)

    def wrap(self, call: Callable, label: str) -> Callable:
        def wrapped(*args, **kwargs):
            step = self._step(label)
            step["calls"] += 1
            step["start_mb"].append(rss_mb())
            self.running.append(label)
            try:
                return call(*args, **kwargs)
            finally:
                self.running.pop()
        return wrapped

    def __enter__(self) -> StepMemory:
        steps = [step for step in STEPS if hasattr(step[0], step[1])]  # the checkout's own
        self._originals = [(owner, name, getattr(owner, name)) for owner, name, _ in steps]
        for (owner, name, label), (_, _, call) in zip(steps, self._originals, strict=True):
            setattr(owner, name, self.wrap(call, label))
        self._sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._sampler.join()
        for owner, name, call in self._originals:
            setattr(owner, name, call)

    def figures(self) -> dict:
        return {label: {"calls": step["calls"],
                        "start_mb_min": round(min(step["start_mb"])) if step["start_mb"] else None,
                        "start_mb_max": round(max(step["start_mb"])) if step["start_mb"] else None,
                        "peak_mb": round(step["peak_mb"]),
                        "pss_with_children_peak_mb": round(step["pss_with_children_peak_mb"])}
                for label, step in self.steps.items()}


def run(args: argparse.Namespace, work: Path) -> dict:
    ws = open_copied_workdir(work)
    root, embedder = ws.root, ws.embedder
    out: dict = {"chunks": ws.status().chunks,
                 "table_format": data_file_format(ws.index_dir / "chunks.lance")}
    for query in make_queries(args.searches, args.seed):
        ws.search(query)  # the query model and the in-memory copies a server holds
    time.sleep(2)  # the in-memory copy loads in the background after the first searches
    out["idle_mb"] = round(rss_mb())
    paths = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".md"))
    rng = random.Random(args.seed)
    embedder.embed = stand_in_vectors(embedder.dimension)  # type: ignore[method-assign]
    out["runs"] = []
    queries = make_queries(10_000, args.seed + 1)
    for _ in range(args.runs):
        busy = rng.sample(paths, k=max(1, int(len(paths) * args.rewrite)))
        rewrite(busy, rng.randrange(1 << 30))
        with StepMemory() as steps, searching(ws, queries, args.search_every):
            started = time.perf_counter()
            report = ws.index()
            seconds = round(time.perf_counter() - started, 1)
        out["runs"].append({"files_rewritten": len(busy),
                            "chunks_written": report.chunks_written, "seconds": seconds,
                            "steps": steps.figures()})
    out["ru_maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


@contextmanager
def searching(ws, queries: list[str], every: float) -> Iterator[None]:
    """A search every ``every`` seconds from a thread meanwhile (none if 0), as a server's
    user would: what searches read into LanceDB's caches and the copies in memory is put
    to the step running when it is sampled."""
    done = threading.Event()

    def search() -> None:
        for query in queries:
            if done.wait(every):
                return
            ws.search(query)

    thread = threading.Thread(target=search, daemon=True)
    if every > 0:
        thread.start()
    try:
        yield
    finally:
        done.set()
        if every > 0:
            thread.join()


def data_file_format(table_dir: Path) -> str:
    """The Lance file format(s) of a table's data files, as written in their footers
    (major.minor: 0.1-0.2 Lance's first, 0.3 is 2.0, 2.n is 2.n). LanceDB makes new tables in
    its default, which moves with its releases (2.1, then 2.2), and a compaction's memory
    depends on it (bench/README.md, "What a retraining holds, and Lance's file formats")."""
    found = set()
    for data_file in (table_dir / "data").glob("*.lance"):
        with open(data_file, "rb") as handle:
            handle.seek(-8, os.SEEK_END)
            found.add("{}.{}".format(*struct.unpack("<HH", handle.read(4))))
    return ", ".join(sorted(found)) or "no data files"


def print_table(r: dict) -> None:
    print(f"{r['chunks']} chunks, data files in Lance format {r['table_format']}; "
          f"idle after the searches {r['idle_mb']} MB")
    for n, run in enumerate(r["runs"], start=1):
        print(f"\nrun {n}: {run['files_rewritten']} files rewritten, "
              f"{run['chunks_written']} chunks written in {run['seconds']} s")
        print(f"{'step':<44}{'calls':>6}{'RSS at start MB':>18}{'peak MB':>9}"
              f"{'PSS with children':>19}")
        for label, step in sorted(run["steps"].items(), key=lambda item: -item[1]["peak_mb"]):
            start = ("" if step["start_mb_min"] is None
                     else f"{step['start_mb_min']}–{step['start_mb_max']}")
            print(f"{label:<44}{step['calls']:>6}{start:>18}{step['peak_mb']:>9}"
                  f"{step['pss_with_children_peak_mb']:>19}")
    print(f"\nru_maxrss {r['ru_maxrss_mb']} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="a server_latency.py workdir (ws/ and index/), left as it is")
    parser.add_argument("--rewrite", type=float, default=0.03,
                        help="share of the files rewritten with new content (0.03)")
    parser.add_argument("--searches", type=int, default=40, help="searches before the run (40)")
    parser.add_argument("--runs", type=int, default=1,
                        help="re-indexes in turn, other files each time (1)")
    parser.add_argument("--seed", type=int, default=1, help="which files are rewritten (1)")
    parser.add_argument("--search-every", type=float, default=0.0,
                        help="seconds between searches from a thread during the runs (0: none)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args()
    problem = workdir_problem(args.workdir)
    if problem:
        parser.error(problem)
    with tempfile.TemporaryDirectory(prefix="reindex-memory-") as tmp:
        work = Path(tmp) / "copy"
        subprocess.run(["cp", "-a", str(args.workdir), str(work)], check=True)
        result = run(args, work)
        shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "reindex_memory.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
