"""A search query's embedding: the query model (``query_model.onnx``, 8-bit weights) against
``model.onnx``, in one process, on the same queries.

Queries: the code-retrieval benchmark's 190 (``--data``, Semble's development set) and,
with ``--scifact``, SciFact's test queries. Each round embeds every query once with each
model, the order of the two models alternating between rounds, each on its own embedder and
session as a server makes it (no bulk session; the query cache is emptied before each
round, so every query runs the model). It prints the latency of one query (p50 / p95 over all
rounds) and how far the two models' vectors are apart (cosine: least, 5th percentile, mean),
and writes ``bench/results/query_embedding.json``. The memory each session holds is
``server_memory.py``'s to measure (a fresh process per figure).

    .venv/bin/python bench/query_embedding.py
    .venv/bin/python bench/query_embedding.py --scifact /work/shared/data/scifact --rounds 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.data import DEFAULT_DATA, annotated_repos  # noqa: E402
from codebench.engine import write_results  # noqa: E402

from rag_lsp.embedding.embedder import OnnxEmbedder  # noqa: E402
from rag_lsp.embedding.model_files import find_model  # noqa: E402

MODELS = ("query model", "model.onnx")


def benchmark_queries(data: Path) -> list[str]:
    queries = []
    for repo in annotated_repos(data):
        raw = json.loads((data / "annotations" / f"{repo}.json").read_text(encoding="utf-8"))
        queries += [item["query"] for item in raw]
    return queries


def scifact_queries(folder: Path) -> list[str]:
    with open(folder / "queries.jsonl", encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


def one_round(embedder: OnnxEmbedder, queries: list[str]) -> tuple[list[float], np.ndarray]:
    embedder._query_vectors = OrderedDict()  # noqa: SLF001 (every query runs the model)
    times, vectors = [], []
    for query in queries:
        started = time.perf_counter()
        vectors.append(embedder.embed_query(query))
        times.append((time.perf_counter() - started) * 1000)
    return times, np.stack(vectors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="code-retrieval benchmark data (annotations/)")
    parser.add_argument("--scifact", type=Path, help="BEIR SciFact folder: its queries too")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per model (default 3)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    queries = benchmark_queries(args.data)
    if args.scifact:
        queries += scifact_queries(args.scifact)
    if not queries:
        raise SystemExit(f"no queries: no annotations in {args.data} (see --data)")
    files = find_model()
    if files.query_onnx_path is None:
        raise SystemExit("no query model installed: run `rag-lsp model install`")
    embedders = {"query model": OnnxEmbedder(files, bulk_in_child=True),
                 "model.onnx": OnnxEmbedder(files, bulk_in_child=True, exact_queries=True)}
    if embedders["query model"].query_onnx_path != files.query_onnx_path:
        raise SystemExit("the query model did not check out (see the warning above)")
    for embedder in embedders.values():
        embedder.warm_up()
    times: dict[str, list[float]] = {name: [] for name in MODELS}
    vectors: dict[str, np.ndarray] = {}
    for round_ in range(args.rounds):
        for name in (MODELS if round_ % 2 == 0 else MODELS[::-1]):
            took, vectors[name] = one_round(embedders[name], queries)
            times[name] += took
    cosines = (vectors["query model"] * vectors["model.onnx"]).sum(axis=1)
    figures = {name: {"p50_ms": round(float(np.percentile(times[name], 50)), 2),
                      "p95_ms": round(float(np.percentile(times[name], 95)), 2)}
               for name in MODELS}
    agreement = {"min": round(float(cosines.min()), 5),
                 "p5": round(float(np.percentile(cosines, 5)), 5),
                 "mean": round(float(cosines.mean()), 5)}
    print(f"{len(queries)} queries x {args.rounds} rounds per model, "
          f"{embedders['model.onnx'].threads} threads")
    print(f"  {'model':<14}{'p50 ms':>8}{'p95 ms':>8}")
    for name in MODELS:
        print(f"  {name:<14}{figures[name]['p50_ms']:>8.2f}{figures[name]['p95_ms']:>8.2f}")
    print(f"cosine between the two models' vectors: least {agreement['min']:.4f}, "
          f"5th percentile {agreement['p5']:.4f}, mean {agreement['mean']:.4f}")
    write_results("query_embedding", {"queries": len(queries), "rounds": args.rounds,
                                      "latency": figures, "cosine": agreement},
                  print_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
