"""What the model's sessions hold: the query's, as a language server makes it, after short and
long queries; and indexing's while it embeds, in the embedding child (as a language server
runs it) or in the process (``--in-process``, as ``rag-lsp index`` runs it); this checkout
beside another one.

Each measurement is a fresh process. It does what the ``rag-lsp`` command does first (the
allocator settings) and loads the model as a server does (indexing's calls meant for a child).
The query part: 300 short queries (3-15 words, as typed), then 30 long ones (150-400 words, cut
at 256 word-pieces: a pasted snippet or stack trace), then 300 short ones again, none repeated
(the vector cache would answer); the process's RSS after each phase, with freed memory handed
back as a server does when idle, and the queries' latency. The indexing part embeds
``embed_throughput.py``'s texts (this repository's code chunked by the engine, and prose)
through ``OnnxEmbedder.embed`` as indexing calls it (length-sorted batches, interruptible),
sampling the RSS of the process holding the session every 10 ms: the peak, the RSS at the end,
word-pieces a second, and how far its vectors are from the first measurement's (the same texts
must give the same vectors in both checkouts, to float32 rounding: onnxruntime's kernels may
round differently from run to run). With ``--baseline DIR`` (a git worktree of an older commit)
the two take turns, the order swapped each round.

    .venv/bin/python bench/model_memory.py --baseline /tmp/wt-before --rounds 3
    .venv/bin/python bench/model_memory.py --in-process --baseline /tmp/wt-before
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from engine_latency import run_child  # this script's folder is on the import path

HERE = Path(__file__).resolve().parent
SAMPLE_SECONDS = 0.01
SHORT_QUERIES, LONG_QUERIES = 300, 30


def query_phases(embedder, seed: int) -> dict:
    """RSS (MB, freed memory handed back) after the query session is made, after short
    queries, and after long ones with short ones after them; latency p50 / p95 in ms."""
    from bench_basics import pct
    from embed_throughput import WORDS
    from index_workspace import RssSampler

    from rag_lsp.memory import return_freed_memory

    rng = random.Random(seed)

    def timed(count: int, words: tuple[int, int]) -> list[float]:
        took = []
        for n in range(count):  # the number keeps each query new (no cached vector)
            text = " ".join(rng.choices(WORDS, k=rng.randint(*words))) + f" q{n}"
            started = time.perf_counter()
            embedder.embed_query(text)
            took.append((time.perf_counter() - started) * 1000)
        return took

    def held() -> int:
        return_freed_memory()
        return RssSampler.current_kb() // 1024

    embedder.warm_up()
    phases = {"session made": held()}
    short = timed(SHORT_QUERIES, (3, 15))
    phases["after short queries"] = held()
    long = timed(LONG_QUERIES, (150, 400))
    short += timed(SHORT_QUERIES, (3, 15))
    phases["after long queries, then short"] = held()
    short = short[20:]  # (the first ones warm the session up)
    return {"rss_mb": phases, "short_ms": [round(pct(short, 0.5), 2), round(pct(short, 0.95), 2)],
            "long_ms": [round(pct(long, 0.5), 1), round(pct(long, 0.95), 1)]}


def child(texts: int, code_share: float, seed: int, in_process: bool, out: Path) -> None:
    from index_workspace import RssSampler, set_up_as_the_command

    import rag_lsp.memory

    set_up_as_the_command(rag_lsp.memory)
    from embed_throughput import build_corpus

    import rag_lsp
    from rag_lsp.config import Settings
    from rag_lsp.embedding.embedder import OnnxEmbedder
    from rag_lsp.embedding.tokenizer import ModelTokenCounter

    embedder = OnnxEmbedder.load(bulk_in_child=not in_process,
                                 index_threads=Settings().indexing_threads())
    queries = None if in_process else query_phases(embedder, seed)
    corpus = build_corpus(ModelTokenCounter(embedder.files.tokenizer_path), texts, code_share,
                          seed)
    tokens = sum(embedder.token_lengths(corpus))

    def child_pid() -> int | None:  # the embedding child, once started (a bench reads it)
        bulk = embedder._bulk  # noqa: SLF001
        return None if in_process or bulk is None else bulk.pid

    sampler = RssSampler(SAMPLE_SECONDS, child_pid)
    sampler.reset()
    started = time.perf_counter()
    vectors = embedder.embed(corpus, before_batch=lambda: None)
    seconds = time.perf_counter() - started
    end_kb = RssSampler.current_kb(child_pid() or "self")
    peak_kb = sampler.peak_kb if in_process else sampler.child_peak_kb
    np.save(out, vectors)
    embedder.close()
    print(json.dumps({"code": str(Path(rag_lsp.__file__).parent.parent), "texts": len(corpus),
                      "tokens": tokens, "seconds": round(seconds, 2),
                      "tokens_per_second": round(tokens / seconds),
                      "peak_mb": peak_kb // 1024, "end_mb": end_kb // 1024,
                      "queries": queries}))


def measure(code: Path, args: argparse.Namespace,
            first: np.ndarray | None) -> tuple[dict, np.ndarray]:
    """One measurement of checkout ``code``, and its vectors; with ``first`` (the first
    measurement's vectors), the largest difference of any component from them."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "vectors.npy"
        run = run_child(str(Path(__file__).resolve()), code,
                        [str(args.texts), str(args.code_share), str(args.seed),
                         "1" if args.in_process else "0", str(out)], HERE, 3600)
        vectors = np.load(out)
    run["max_difference"] = float(np.abs(vectors - first).max()) if first is not None else 0.0
    return run, vectors


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        texts, share, seed, in_process, out = sys.argv[2:7]
        child(int(texts), float(share), int(seed), in_process == "1", Path(out))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=1200, help="texts to embed (1200)")
    parser.add_argument("--code-share", type=float, default=0.6, help="share of code chunks")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--in-process", action="store_true",
                        help="the session in the measured process, as `rag-lsp index` runs "
                             "it (default: in its child, as the language server runs it)")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure beside")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per checkout")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    codes = {"this tree": HERE.parent}
    if args.baseline is not None:
        codes["baseline"] = args.baseline.resolve()
    runs: dict[str, list[dict]] = {name: [] for name in codes}
    names = list(codes)
    first = None
    for round_no in range(args.rounds):
        for name in names if round_no % 2 == 0 else names[::-1]:
            run, vectors = measure(codes[name], args, first)
            first = vectors if first is None else first
            runs[name].append(run)
            if not args.json:
                print(f"round {round_no + 1}, {name}: indexing's session: peak "
                      f"{run['peak_mb']} MB, end {run['end_mb']} MB, {run['seconds']} s, "
                      f"{run['tokens_per_second']} tok/s, vectors within "
                      f"{run['max_difference']:.1e} of the first run's", flush=True)
                if run["queries"]:
                    q = run["queries"]
                    print("  query session, RSS MB: " + ", ".join(
                        f"{k} {v}" for k, v in q["rss_mb"].items()) + f"; short queries "
                        f"p50 / p95 {q['short_ms'][0]} / {q['short_ms'][1]} ms, long "
                        f"{q['long_ms'][0]} / {q['long_ms'][1]}", flush=True)
    summary = {name: {"peak_mb": [r["peak_mb"] for r in rs],
                      "end_mb": [r["end_mb"] for r in rs],
                      "tokens_per_second_median": statistics.median(
                          r["tokens_per_second"] for r in rs),
                      "max_difference": max(r["max_difference"] for r in rs),
                      "queries": [r["queries"] for r in rs]}
               for name, rs in runs.items()}
    result = {"benchmark": "model_memory", "date": time.strftime("%Y-%m-%d %H:%M"),
              "where": "process" if args.in_process else "child", "texts": args.texts,
              "tokens": runs[names[0]][0]["tokens"], "codes": {n: str(c) for n, c in
                                                              codes.items()},
              "summary": summary, "command": " ".join(sys.argv)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        where = "the embedding child" if not args.in_process else "the process"
        print(f"\nindexing's session, {result['texts']} texts, {result['tokens']} word-pieces; "
              f"RSS of {where}, MB")
        for name, s in summary.items():
            print(f"  {name:10s} peak {s['peak_mb']}, end {s['end_mb']}, median "
                  f"{s['tokens_per_second_median']} tok/s, vectors within "
                  f"{s['max_difference']:.1e} of the first run's")
        if not args.in_process:
            print("the query's session, RSS of the process after short / long queries, MB")
            for name, s in summary.items():
                print(f"  {name:10s} " + "; ".join(
                    f"{q['rss_mb']['after short queries']} / "
                    f"{q['rss_mb']['after long queries, then short']}" for q in s["queries"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
