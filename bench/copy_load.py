"""The in-memory copy's load: how far it takes a process's memory above where it started
(the peak), what it holds once freed memory is handed back, and how long it takes.

Each measurement is a fresh process, set up as the ``rag-lsp`` command sets itself up (glibc's
heaps, Arrow on the system allocator, LanceDB's read-ahead), that opens the index of a
``server_latency.py`` workdir (read only: nothing is written) and loads its copy once, as a
server does in the background after its start or a reload (``ChunkStore._load_vectors``),
its RSS sampled every millisecond from a thread. With ``--baseline DIR`` (another checkout,
e.g. a git worktree of an older commit) the two take turns, the order swapped each round.
Below 50,000 chunks the copy holds the vectors, the postings, the ranking columns and, within
its budget, the text; above, nothing is loaded.

    .venv/bin/python bench/copy_load.py --workdir /tmp/bench/lat47k --baseline /tmp/wt-before \\
        --rounds 3
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

# Nothing heavy before the child's set-up (see bench_basics)
from bench_basics import checkouts, workdir_problem  # this script's folder is on the path
from engine_latency import run_child

HERE = Path(__file__).resolve().parent


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:")) / 1024


class PeakRss:
    """The highest RSS seen while ``with``-ed, sampled every millisecond."""

    def __enter__(self) -> PeakRss:
        self.peak, self._going = rss_mb(), True
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while self._going:
            self.peak = max(self.peak, rss_mb())
            time.sleep(0.001)

    def __exit__(self, *exc) -> None:
        self._going = False
        self._thread.join()


def cpu_seconds() -> float:
    """CPU time of every thread of this process so far (LanceDB decodes on threads of its
    own; the sampling thread's share is the same for every checkout)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(index_dir: Path) -> None:
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)
    import rag_lsp
    from rag_lsp.memory import return_freed_memory
    from rag_lsp.store.lance_store import ChunkStore
    from rag_lsp.store.manifest import IndexManifest

    manifest = IndexManifest.read(index_dir)
    if manifest is None:
        raise SystemExit(f"{index_dir} has no index manifest")
    store = ChunkStore(index_dir, manifest.dimension)
    store.count_chunks()  # the tables opened, untimed
    return_freed_memory()
    start = rss_mb()
    began, cpu = time.perf_counter(), cpu_seconds()
    with PeakRss() as peak:
        matrix = store._load_vectors()  # noqa: SLF001 (what the background load runs)
    seconds, cpu = time.perf_counter() - began, cpu_seconds() - cpu
    return_freed_memory()
    print(json.dumps({
        "code": str(Path(rag_lsp.__file__).parent.parent), "start_mb": round(start, 1),
        "peak_above_mb": round(peak.peak - start, 1), "held_mb": round(rss_mb() - start, 1),
        "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
        "rows": 0 if matrix is None else len(matrix.row_ids)}))


def main() -> int:
    if sys.argv[1:2] == ["--child"]:  # the measured process (see engine_latency.run_child)
        child(Path(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="a server_latency.py workdir (ws/ and index/)")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure beside")
    parser.add_argument("--rounds", type=int, default=3, help="processes per checkout (3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    problem = workdir_problem(args.workdir)
    if problem:
        parser.error(problem)
    index_dir = next(args.workdir.glob("index/*/manifest.json")).parent
    codes = checkouts(HERE.parent, args.baseline)
    runs: dict[str, list[dict]] = {name: [] for name in codes}
    for round_ in range(args.rounds):
        order = list(codes) if round_ % 2 == 0 else list(reversed(codes))
        for name in order:
            runs[name].append(run_child(str(Path(__file__).resolve()), codes[name],
                                        [str(index_dir)], HERE, 600))
            last = runs[name][-1]
            print(f"[{time.strftime('%H:%M:%S')}] {name}: peak +{last['peak_above_mb']} MB, "
                  f"held +{last['held_mb']} MB, {last['seconds']} s, "
                  f"CPU {last['cpu_seconds']} s", file=sys.stderr)
    result = {"index": str(index_dir), "runs": runs}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{runs['this tree'][0]['rows']} rows; medians of {args.rounds} processes each")
    print(f"{'':16}{'peak above start':>18}{'held after':>12}{'seconds':>9}{'CPU s':>7}")
    for name, measured in runs.items():
        def median(key: str) -> float:
            return statistics.median(m[key] for m in measured)  # noqa: B023
        print(f"{name:16}{median('peak_above_mb'):>15.1f} MB{median('held_mb'):>9.1f} MB"
              f"{median('seconds'):>9.2f}{median('cpu_seconds'):>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
