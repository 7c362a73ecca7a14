"""Indexing a generated workspace: initial index, no-op re-index, touched files, edited files.

Generates N files (~200 lines each; 60% Python modules with classes, functions and
docstrings, 40% Markdown with headings, paragraphs and code fences) from a seed, with varied
vocabulary so that chunks are distinct (identical chunks share one vector by content hash,
which would flatter the figures). Then times ``Workspace.index`` for:

1. the initial index (files, chunks, chunks embedded, peak RSS);
2. a re-index with nothing changed (must embed 0 chunks: size+mtime check);
3. 100 files rewritten with identical bytes and a new mtime (0 embedded: sha256 check);
4. 10 Python files with one function edited each (only the changed chunks embedded);
5. 10 more such edits delivered as file events through ``Workspace.update(paths)``.

The process is set up as the servers have it: glibc's heaps capped as the ``rag-lsp``
command caps them (before any library starts a thread), buffers of 1 MiB or more mapped and
handed back when freed (since 2026-11-27, twentieth session), and Arrow allocating from glibc
(since 2026-11-26, seventeenth session; ``ARROW_DEFAULT_MEMORY_POOL=mimalloc`` in the environment:
Arrow's own allocator, as before), the query's model session made
before the run, as a ready folder's warm-up makes it (``--no-query-session``: the indexing
session alone, as in figures before 2026-11-26), and indexing's model calls in a child
process (``--bulk-in-process``: in this process, as ``rag-lsp index`` and figures before
2026-11-26 (fifteenth session) have them). Peak RSS is given for this process, the child and
the two together.

    .venv/bin/python bench/index_workspace.py --files 50      # quick
    .venv/bin/python bench/index_workspace.py                 # 1,000 files
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
BASE_WORDS = ("cache index token vector query store shard batch window queue stream frame "
              "packet socket buffer ledger invoice order cart user account session policy "
              "route graph node edge tree heap matrix tensor signal sensor metric alert "
              "report parser lexer schema record field column row table cursor lock worker "
              "task job retry timeout backoff budget quota tenant region zone replica").split()
SYLLABLES = "ka lo mi ra ten vor zu pel qua dri sen fo bal nix tor gem hul ost yar cle".split()


class Vocab:
    """Real words plus made-up ones, so every file's identifiers and prose differ."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        made_up = {"".join(rng.choices(SYLLABLES, k=rng.randint(2, 3))) for _ in range(600)}
        self.words = BASE_WORDS + sorted(made_up)

    def word(self) -> str:
        return self.rng.choice(self.words)

    def name(self, parts: int = 2) -> str:
        return "_".join(self.word() for _ in range(parts))

    def sentence(self, lo: int = 6, hi: int = 16) -> str:
        words = [self.word() for _ in range(self.rng.randint(lo, hi))]
        return " ".join(words).capitalize() + "."


def gen_function(v: Vocab, indent: str = "", method: bool = False) -> list[str]:
    rng, args = v.rng, [v.name(1) for _ in range(v.rng.randint(1, 3))]
    sig = ", ".join((["self"] if method else []) + args)
    body = [f'def {v.name()}({sig}):', f'    """{v.sentence()}', "",
            f"    {v.sentence()}", '    """', f"    {(acc := v.name())} = {rng.randint(0, 999)}"]
    for _ in range(rng.randint(2, 6)):
        body += [f"    for item in {rng.choice(args)}:",
                 f"        if item.{v.word()} > {rng.randint(1, 500)}:",
                 f"            {acc} += item.{v.word()}  # {v.sentence(3, 6)}"]
    body.append(f"    return {acc}")
    return [indent + line if line else line for line in body] + [""]


def gen_python(v: Vocab) -> str:
    lines = [f'"""{v.sentence()}"""', "", "from __future__ import annotations", "",
             f"import {v.rng.choice(['os', 'json', 're', 'math', 'time'])}", "",
             f"{v.name().upper()} = {v.rng.randint(1, 10_000)}", "", ""]
    lines += gen_function(v) + [""]  # at least one top-level function (edited later)
    while len(lines) < 190:
        if v.rng.random() < 0.4:
            lines += [f"class {v.word().capitalize()}{v.word().capitalize()}:",
                      f'    """{v.sentence()}"""', ""]
            for _ in range(v.rng.randint(2, 3)):
                lines += gen_function(v, "    ", method=True)
            lines.append("")
        else:
            lines += gen_function(v) + [""]
    return "\n".join(lines) + "\n"


def gen_markdown(v: Vocab) -> str:
    lines = [f"# {v.sentence(2, 5)[:-1]}", "", v.sentence(10, 30), ""]
    while len(lines) < 190:
        lines += [f"## {v.sentence(2, 5)[:-1]}", ""]
        for _ in range(v.rng.randint(1, 3)):
            lines += [" ".join(v.sentence() for _ in range(v.rng.randint(2, 5))), ""]
        if v.rng.random() < 0.5:
            lines += [f"- {v.sentence(3, 8)}" for _ in range(v.rng.randint(2, 5))] + [""]
        if v.rng.random() < 0.5:
            lines += ["```python", *gen_function(v)[:-1], "```", ""]
        if v.rng.random() < 0.3:
            lines += [f"### {v.sentence(2, 4)[:-1]}", "", v.sentence(10, 25), ""]
    return "\n".join(lines) + "\n"


def generate(root: Path, files: int, seed: int) -> list[Path]:
    rng = random.Random(seed)
    vocab = Vocab(rng)
    paths = []
    for i in range(files):
        is_python = i % 5 < 3
        sub = root / f"pkg{i // 50:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / (f"mod_{i:04d}.py" if is_python else f"doc_{i:04d}.md")
        path.write_text(gen_python(vocab) if is_python else gen_markdown(vocab), "utf-8")
        paths.append(path)
    return paths


def edit_one_function(path: Path, tag: str) -> None:
    """Change the return line of the first top-level function (one chunk's content)."""
    lines = path.read_text("utf-8").split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("def "))
    ret = next(i for i in range(start, len(lines)) if lines[i].startswith("    return "))
    lines[ret] = f"{lines[ret]} + 1  # edited {tag}"
    path.write_text("\n".join(lines), "utf-8")


def set_up_as_the_command(memory) -> None:
    """What the ``rag-lsp`` command does first (``rag_lsp.memory.set_up_process``: the
    allocators, LanceDB's read-ahead), for a bench that stands in for it; in an older
    checkout (a baseline), the parts it has."""
    set_up = getattr(memory, "set_up_process", None)
    if set_up is not None:
        set_up()
        return
    for name in ("limit_malloc_arenas", "map_large_allocations", "arrow_on_system_allocator"):
        getattr(memory, name, lambda: None)()


class RssSampler:
    """Peak resident memory (VmRSS from /proc) since the last reset(): of this process, of the
    embedding child it has (``child_pid()``, if any), and of the two together."""

    def __init__(self, interval: float = 0.05, child_pid=lambda: None):
        self.peak_kb = self.child_peak_kb = self.sum_peak_kb = 0
        self._interval = interval
        self._child_pid = child_pid
        threading.Thread(target=self._loop, daemon=True).start()

    @staticmethod
    def current_kb(pid: int | str = "self") -> int:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:  # the child has exited
            pass
        return 0

    def _sample(self) -> None:
        own = self.current_kb()
        pid = self._child_pid()
        child = self.current_kb(pid) if pid else 0
        self.peak_kb = max(self.peak_kb, own)
        self.child_peak_kb = max(self.child_peak_kb, child)
        self.sum_peak_kb = max(self.sum_peak_kb, own + child)

    def reset(self) -> None:
        self.peak_kb = self.child_peak_kb = self.sum_peak_kb = 0
        self._sample()

    def _loop(self) -> None:
        while True:
            self._sample()
            time.sleep(self._interval)


def compact_now(ws) -> None:
    """Compact the index now, due or not."""
    try:
        ws.compact(force=True)
    except TypeError:  # checkouts before the twenty-fourth session compact whenever asked
        ws.compact()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000, help="files to generate (1000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, help="generate here (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=RESULTS / "index_workspace.json")
    parser.add_argument("--no-query-session", action="store_true",
                        help="do not make the query's model session before the run")
    parser.add_argument("--settle", type=float, default=0.0, metavar="SECONDS",
                        help="wait this long before each step after the first, as a server "
                             "is quiet between edits (its freed memory is handed back after "
                             "5 s quiet); default 0: each step right after the one before")
    parser.add_argument("--bulk-in-process", action="store_true",
                        help="run indexing's model calls in this process, as `rag-lsp index` "
                             "does (default: in a child process, as the servers do)")
    args = parser.parse_args()
    # As the rag-lsp command does, before any library starts a thread (MALLOC_ARENA_MAX wins)
    # and before pyarrow loads (ARROW_DEFAULT_MEMORY_POOL=mimalloc in the environment gives
    # the allocator of figures before 2026-11-26, sixteenth session). Here, not at import:
    # other benches import this module for its generator.
    from rag_lsp import memory

    set_up_as_the_command(memory)
    from rag_lsp import Workspace
    from rag_lsp.config import Settings
    from rag_lsp.indexing.progress import IndexReport

    tmp = None if args.workdir else tempfile.TemporaryDirectory(prefix="index-bench-")
    workdir = args.workdir or Path(tmp.name)
    root, index_dir = workdir / "ws", workdir / "index"
    paths = generate(root, args.files, args.seed)
    lines = sum(p.read_text("utf-8").count("\n") for p in paths)
    # The model is what is measured: vectors from the shared cache would hide it.
    settings = Settings.from_dict({"indexPath": str(index_dir), "embeddingCache": False})
    ws = Workspace.open(root, settings, bulk_in_child=not args.bulk_in_process)
    sampler = RssSampler(child_pid=lambda: getattr(getattr(ws.embedder, "_bulk", None),
                                                   "pid", None))
    ws.embedder.embed(["warm up"])
    if not args.no_query_session:
        ws.embedder.embed_query("warm up")  # as a ready folder's warm-up does
    sessions = ", ".join(
        (["indexing session in a child"] if not args.bulk_in_process else ["indexing session"])
        + ([] if args.no_query_session else ["query session"]))
    rss_model_mb = RssSampler.current_kb() / 1024
    print(f"{len(paths)} files, {lines} lines in {root}; RSS after model load "
          f"({sessions}) {rss_model_mb:.0f} MB", flush=True)

    rng = random.Random(args.seed + 1)
    python_files = [p for p in paths if p.suffix == ".py"]
    edits = rng.sample(python_files, min(20, len(python_files)))
    rows = []

    def step(name: str, action, use_update: list[str] | None = None, run=None) -> None:
        if rows and args.settle:
            time.sleep(args.settle)
        action()
        start_kb = RssSampler.current_kb()
        sampler.reset()
        started = time.perf_counter()
        if run is not None:
            run()
            report = IndexReport(chunks_total=ws.status().chunks)
        elif use_update:
            report = ws.update(use_update)
        else:
            report = ws.index(full=name == "initial")
        seconds = time.perf_counter() - started
        rows.append({"step": name, "seconds": round(seconds, 2),
                     "files_indexed": report.files_indexed,
                     "files_unchanged": report.files_unchanged,
                     "chunks_total": report.chunks_total,
                     "chunks_embedded": report.chunks_embedded,
                     "chunks_reused": report.chunks_reused,
                     "start_rss_mb": round(start_kb / 1024),
                     "peak_rss_mb": round(sampler.peak_kb / 1024),
                     "child_peak_rss_mb": round(sampler.child_peak_kb / 1024),
                     "sum_peak_rss_mb": round(sampler.sum_peak_kb / 1024)})
        print(f"  {name}: {seconds:.2f} s, {report.chunks_embedded} embedded", flush=True)

    def touch() -> None:
        for path in rng.sample(paths, min(100, len(paths))):
            path.write_bytes(path.read_bytes())  # identical bytes...
            stat = path.stat()  # ...and a surely-new mtime (coarse clocks)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))

    first, second = edits[:10], edits[10:]
    step("initial", lambda: None)
    step("no change", lambda: None)
    step("touch 100 (same bytes)", touch)
    step(f"edit {len(first)} functions", lambda: [edit_one_function(p, "a") for p in first])
    step(f"update() {len(second)} edited", lambda: [edit_one_function(p, "b") for p in second],
         use_update=[p.relative_to(root).as_posix() for p in second] or None)
    # The compaction a server makes once it is due (every few bursts of edits since the
    # twenty-fourth session; after every run before): rewrites the whole chunks table.
    step("compaction", lambda: None, run=lambda: compact_now(ws))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB

    print(f"\n{args.files} generated files, {lines} lines; ru_maxrss {peak_mb:.0f} MB "
          f"(RSS after model load, {sessions}: {rss_model_mb:.0f} MB)")
    print(f"{'step':<24} {'seconds':>8} {'indexed':>8} {'unchanged':>9} {'chunks':>7} "
          f"{'embedded':>9} {'reused':>7} {'RSS at start':>12} {'peak RSS MB':>11} "
          f"{'child':>6} {'sum':>6}")
    for r in rows:
        print(f"{r['step']:<24} {r['seconds']:>8.2f} {r['files_indexed']:>8} "
              f"{r['files_unchanged']:>9} {r['chunks_total']:>7} {r['chunks_embedded']:>9} "
              f"{r['chunks_reused']:>7} {r['start_rss_mb']:>12} {r['peak_rss_mb']:>11} "
              f"{r['child_peak_rss_mb']:>6} "
              f"{r['sum_peak_rss_mb']:>6}")
    initial = rows[0]
    print(f"initial: {args.files / initial['seconds']:.1f} files/s, "
          f"{initial['chunks_embedded'] / initial['seconds']:.1f} chunks/s embedded")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "index_workspace", "date": time.strftime("%Y-%m-%d %H:%M"),
        "files": args.files, "lines": lines, "seed": args.seed, "cpu_count": os.cpu_count(),
        "settle_seconds": args.settle,
        "query_session": not args.no_query_session, "bulk_in_child": not args.bulk_in_process,
        "rss_after_model_load_mb": round(rss_model_mb), "ru_maxrss_mb": round(peak_mb),
        "steps": rows, "command": " ".join(sys.argv),
    }, indent=2), encoding="utf-8")
    print(f"wrote {args.out}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
