"""Memory of a process that serves searches: resident set size (RSS) at each stage, with a
10k and a 100k-chunk index loaded.

Builds each index once (``--workdir``; rows shaped like real ones — this repository's source
as text, random unit vectors — through ``ChunkStore``, with its full-text indexes, compacted,
plus a manifest naming the installed model) and then, in a fresh process per measurement, does
what ``rag-lsp serve`` does for a folder: import the engine, load the model, open the
workspace, answer searches (the first ones by LanceDB's scan, then from the in-memory vector
matrix, which loads in the background), then sit idle until the model's indexing session is
let go and freed memory is handed back (after 60 s and 5 s in a server; 2 s here; code since
2026-11-26 never makes the indexing session in a process that only searches). It prints RSS
after each stage and the peak.

``--baseline DIR`` runs the same child with the code of another checkout (a git worktree of
an older commit) in the same run, alternating, so the two columns share the machine's state.

    .venv/bin/python bench/server_memory.py --workdir /tmp/bench/memory     # 10k and 100k
    .venv/bin/python bench/server_memory.py --workdir /tmp/bench/memory --chunks 100000 \\
        --baseline /tmp/wt-before
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGES = ("imports", "model loaded", "workspace open", "first search (scan)",
          "vectors in memory", "after 100 searches", "idle (bulk session gone, memory trimmed)")
IDLE_SECONDS = 2.0  # the embedder's BULK_IDLE_SECONDS (60 s in a server) and the idle trim's
# IDLE_TRIM_SECONDS (5 s), shortened here
QUERIES = ("how are retries scheduled", "parse the settings file", "where is the index written",
           "tokenizer for the model", "rank files by agreement", "watch files for changes",
           "handle a request that failed", "knowledge base entry", "compact the table",
           "split text into chunks")


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


# ---- the measured process ---------------------------------------------------------------


def child(index_dir: Path, root: Path) -> None:
    stages = {}
    # What `rag-lsp` does first thing (code before 2026-11-25, which --baseline may run,
    # has none of it: then nothing is done).
    from index_workspace import set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)
    import rag_lsp.workspace as workspace_module  # noqa: F401  (what serve imports)

    stages["imports"] = rss_mb()
    from rag_lsp.config import Settings
    from rag_lsp.embedding import embedder as embedder_module
    from rag_lsp.workspace import Workspace, load_embedder

    embedder_module.BULK_IDLE_SECONDS = IDLE_SECONDS  # older code: no such thing, no effect
    rag_lsp.memory.IDLE_TRIM_SECONDS = IDLE_SECONDS  # (the same: 5 s in a server)

    settings = Settings.from_dict({"indexPath": str(index_dir)})
    try:  # as the server loads it: indexing's model calls in a child process
        embedder, error = load_embedder(settings, root, bulk_in_child=True)
    except TypeError:  # code before 2026-11-26 (fifteenth session), which --baseline may run
        embedder, error = load_embedder(settings, root)
    if embedder is None:
        raise SystemExit(f"the model is needed: {error}")
    embedder.embed_query("warm up")  # the query session, as the first search would
    stages["model loaded"] = rss_mb()
    ws = Workspace.open(root, settings, embedder=embedder)
    ws.status()
    stages["workspace open"] = rss_mb()
    ws.search(QUERIES[0])
    stages["first search (scan)"] = rss_mb()
    store = ws._index.store()  # noqa: SLF001 (the bench waits for the background load)
    deadline = time.monotonic() + 120
    # (named _vectors_in_memory in code before 2026-11-25, which --baseline may run)
    in_memory = getattr(store, "vectors_in_memory", None) or store._vectors_in_memory  # noqa: SLF001
    while in_memory() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        ws.search(QUERIES[1])
    stages["vectors in memory"] = rss_mb()
    for n in range(100):
        ws.search(f"{QUERIES[n % len(QUERIES)]} {n}")
    stages["after 100 searches"] = rss_mb()
    time.sleep(IDLE_SECONDS + 1)
    stages["idle (bulk session gone, memory trimmed)"] = rss_mb()
    print(json.dumps({"stages": stages, "peak": rss_mb("VmHWM"),
                      "chunks": ws.status().chunks}))


# ---- building the index -----------------------------------------------------------------


def ensure_index(workdir: Path, chunks: int) -> tuple[Path, Path]:
    sys.path.insert(0, str(HERE))
    from integrity_cost import build

    from rag_lsp.embedding.model_files import find_model, load_manifest, verify_files
    from rag_lsp.store.manifest import SCHEMA_VERSION, IndexManifest

    index_dir, root = workdir / f"index-{chunks}", workdir / "ws"
    root.mkdir(parents=True, exist_ok=True)
    if IndexManifest.read(index_dir) is not None:
        return index_dir, root
    print(f"building a {chunks}-chunk index in {index_dir}…", flush=True)
    build(index_dir, chunks)
    model = load_manifest()
    IndexManifest(SCHEMA_VERSION, model["model_id"],
                  verify_files(find_model())["model.onnx"], int(model["dimension"]),
                  created_at="bench").write(index_dir)
    return index_dir, root


def measure(code: Path, index_dir: Path, root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child",
                           str(index_dir), str(root)], cwd=code, env=env, capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"the measured process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), Path(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench/memory"),
                        help="where the indexes are built and kept (default: %(default)s)")
    parser.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--baseline", type=Path, help="another checkout to measure beside")
    parser.add_argument("--rounds", type=int, default=1, help="measurements per code tree")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    codes = {"this tree": HERE.parent}
    if args.baseline:
        codes = {"baseline": args.baseline.resolve(), **codes}
    results: dict = {}
    for chunks in args.chunks:
        index_dir, root = ensure_index(args.workdir, chunks)
        runs: dict[str, list[dict]] = {name: [] for name in codes}
        for round_ in range(args.rounds):
            order = list(codes) if round_ % 2 == 0 else list(reversed(codes))
            for name in order:
                runs[name].append(measure(codes[name], index_dir, root))
        results[chunks] = runs
        print(f"\n{runs[next(iter(codes))][0]['chunks']} chunks: RSS in MB "
              f"(median of {args.rounds})")
        print(f"  {'stage':<24}" + "".join(f"{name:>14}" for name in codes))
        for stage in (*STAGES, "peak"):
            values = []
            for name in codes:
                got = sorted(r["peak"] if stage == "peak" else r["stages"][stage]
                             for r in runs[name])
                values.append(got[len(got) // 2])
            print(f"  {stage:<24}" + "".join(f"{v:>14.0f}" for v in values))
    if args.json:
        print(json.dumps(results, indent=2))
    sys.path.insert(0, str(HERE))
    from codebench.engine import write_results
    write_results("server_memory", {str(k): v for k, v in results.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
