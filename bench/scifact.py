"""BEIR SciFact retrieval quality of the real engine: nDCG@10 (and Recall@100) per search mode.

Builds a throw-away workspace with one file per abstract (``docs/<_id>.txt`` = title + "\\n" +
text), indexes it with ``Workspace.index`` exactly as a user would, then runs the 300 test
queries in vector, lexical and hybrid mode. The data is read from ``../shared/data/scifact``
and never copied into the repository.

    .venv/bin/python bench/scifact.py                 # full run (index ~ several minutes)
    .venv/bin/python bench/scifact.py --workdir /tmp/scifact-ws --reuse   # iterate on search
    .venv/bin/python bench/scifact.py --direct        # + MTEB protocol: one item per doc
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.engine import parse_overrides  # noqa: E402

from rag_lsp import Workspace  # noqa: E402
from rag_lsp.config import Settings
from rag_lsp.search.ranking import RULE_SETTINGS
from rag_lsp.store.lance_store import ChunkStore, FileRecord

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "scifact"
RESULTS = REPO / "bench" / "results"
MODES = ("vector", "lexical", "hybrid")
# Published nDCG@10 on SciFact test (see the data folder's README).
REFERENCE = {"vector": ("all-MiniLM-L6-v2, MTEB", 0.6451), "lexical": ("BM25, BEIR paper", 0.665)}


def load_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels


def ndcg_at_k(ranked: list[str], rels: dict[str, int], k: int = 10) -> float:
    """pytrec_eval's ndcg_cut: linear gains (the qrels score), 1/log2(rank+1) discount."""
    dcg = sum(rels.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in rels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: list[str], rels: dict[str, int], k: int = 100) -> float:
    relevant = {d for d, g in rels.items() if g > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def doc_id(path: str) -> str:
    return Path(path).stem  # docs/<_id>.txt


def write_docs(corpus: list[dict], docs_dir: Path) -> None:
    docs_dir.mkdir(parents=True, exist_ok=True)
    for doc in corpus:
        text = f"{doc.get('title', '')}\n{doc.get('text', '')}"
        (docs_dir / f"{doc['_id']}.txt").write_text(text, encoding="utf-8")


def pick_corpus(corpus: list[dict], qrels: dict, max_docs: int | None) -> list[dict]:
    """All docs, or (for a quick smoke run) every judged doc plus the first others up to N."""
    if not max_docs or max_docs >= len(corpus):
        return corpus
    judged = {d for rels in qrels.values() for d in rels}
    keep = [d for d in corpus if d["_id"] in judged]
    keep += [d for d in corpus if d["_id"] not in judged][: max(0, max_docs - len(keep))]
    return keep


def item_protocol_ndcg(ws: Workspace, corpus: list[dict], queries: dict, qrels: dict,
                       store_dir: Path) -> float:
    """MTEB's protocol through the engine's own store and search: one item per document
    (title + " " + text, which the model cuts at 256 word-pieces), written to a real LanceDB
    :class:`ChunkStore` and ranked by its vector search (cosine, no ranking rules). It checks the
    model, pooling, store and vector search against the published figure, without the
    chunking that the workspace run adds."""
    texts = [f"{d.get('title', '')} {d.get('text', '')}" for d in corpus]
    vectors = ws.embedder.embed(texts)
    shutil.rmtree(store_dir, ignore_errors=True)
    store = ChunkStore(store_dir, ws.embedder.dimension, create=True)
    rows = [
        {"id": d["_id"], "path": f"docs/{d['_id']}.txt", "start_line": 1, "end_line": 1,
         "language": "text", "kind": "text", "symbol": "", "text": text,
         "search_text": text, "defines": "", "terms": "", "content_hash": d["_id"],
         "vector": vec}
        for d, text, vec in zip(corpus, texts, vectors, strict=True)
    ]
    records = [FileRecord(r["path"], 0, 0, "", 1) for r in rows]
    store.replace_files(records, rows)
    total = 0.0
    for qid in sorted(qrels):
        hits = store.vector_search(ws.embedder.embed_query(queries[qid]), 10, terms=())  # ids only
        total += ndcg_at_k([doc_id(h["path"]) for h in hits], qrels[qid])
    return total / len(qrels)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="BEIR scifact folder")
    parser.add_argument("--workdir", type=Path, help="keep the workspace+index here (else temp)")
    parser.add_argument("--reuse", action="store_true",
                        help="skip indexing when --workdir already holds an index")
    parser.add_argument("--max-docs", type=int, help="smoke run: judged docs + others up to N")
    parser.add_argument("--no-recall", action="store_true", help="skip the Recall@100 pass")
    parser.add_argument("--direct", action="store_true",
                        help="also score MTEB's protocol: one item per document, no chunking")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                        help="search settings to override, e.g. rankFileAgreement=0")
    parser.add_argument("--ablate", action="store_true",
                        help="also score hybrid search with each ranking rule switched off")
    parser.add_argument("--out", type=Path, default=RESULTS / "scifact.json")
    args = parser.parse_args()

    corpus_all = load_jsonl(args.data / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in load_jsonl(args.data / "queries.jsonl")}
    qrels = load_qrels(args.data / "qrels" / "test.tsv")
    corpus = pick_corpus(corpus_all, qrels, args.max_docs)

    tmp = None if args.workdir else tempfile.TemporaryDirectory(prefix="scifact-")
    workdir = args.workdir or Path(tmp.name)
    root, index_dir = workdir / "ws", workdir / "index"
    overrides = parse_overrides(args.set)
    settings = Settings.from_dict({"indexPath": str(index_dir), "threshold": 0.0, "topK": 10,
                                   "embeddingCache": False,  # index time is measured
                                   **overrides})

    reused = args.reuse and (index_dir / "manifest.json").exists()
    if not reused:
        write_docs(corpus, root / "docs")
    ws = Workspace.open(root, settings)
    index_info: dict = {"reused": reused}
    if reused:
        status = ws.status()
        index_info.update(files=status.files, chunks=status.chunks)
        print(f"reusing index in {index_dir}: {status.files} files, {status.chunks} chunks")
    else:
        def progress(p) -> None:  # stderr, so a background run can be polled
            if p.phase != "index" or p.files_done % 500 == 0 or p.files_done == p.files_total:
                print(f"  [{p.phase}] {p.files_done}/{p.files_total} files, "
                      f"{p.chunks_embedded} chunks embedded", file=sys.stderr, flush=True)
        print(f"indexing {len(corpus)} documents in {root} ...", flush=True)
        started = time.perf_counter()
        report = ws.index(full=True, progress=progress)
        index_info.update(
            seconds=round(time.perf_counter() - started, 1), files=report.files_indexed,
            chunks=report.chunks_total, chunks_embedded=report.chunks_embedded,
            skipped=report.files_skipped,
        )

    metrics: dict[str, dict] = {}
    for mode in MODES:
        started = time.perf_counter()
        ndcg, recall = [], []
        for qid in sorted(qrels):
            hits = ws.search(queries[qid], top_k=10, threshold=0.0, mode=mode).results
            ndcg.append(ndcg_at_k([doc_id(h.path) for h in hits], qrels[qid]))
            if not args.no_recall:  # a separate top-100 pass: candidate pools grow with top_k
                deep = ws.search(queries[qid], top_k=100, threshold=0.0, mode=mode).results
                recall.append(recall_at_k([doc_id(h.path) for h in deep], qrels[qid]))
        metrics[mode] = {
            "ndcg@10": round(sum(ndcg) / len(ndcg), 4),
            "recall@100": round(sum(recall) / len(recall), 4) if recall else None,
            "seconds": round(time.perf_counter() - started, 1),
        }
    ablations: dict[str, float] = {}
    if args.ablate:  # the same index searched with one rule off at a time (hybrid, nDCG@10)
        for rule, off in RULE_SETTINGS.items():
            variant = Workspace(ws.root, Settings.from_dict({**settings.to_dict(), rule: off}),
                                ws.embedder)
            scores = [ndcg_at_k([doc_id(h.path) for h in variant.search(
                queries[qid], top_k=10, threshold=0.0, mode="hybrid").results], qrels[qid])
                for qid in sorted(qrels)]
            ablations[rule] = round(sum(scores) / len(scores), 4)
    direct = (round(item_protocol_ndcg(ws, corpus, queries, qrels, workdir / "items"), 4)
              if args.direct else None)

    print(f"\nSciFact test: {len(qrels)} queries, {len(corpus)} docs, "
          f"{index_info.get('chunks')} chunks"
          + (f", indexed in {index_info['seconds']} s" if not reused else " (index reused)"))
    print(f"{'mode':<8} {'nDCG@10':>8} {'R@100':>7} {'reference':>10}  {'(source)':<24} {'s':>6}")
    for mode, m in metrics.items():
        name, ref = REFERENCE.get(mode, ("", None))
        recall = f"{m['recall@100']:.4f}" if m["recall@100"] is not None else "-"
        ref_text = f"{ref:.4f}" if ref else "-"
        print(f"{mode:<8} {m['ndcg@10']:>8.4f} {recall:>7} {ref_text:>10}  {name:<24} "
              f"{m['seconds']:>6}")
    if direct is not None:
        print(f"{'items':<8} {direct:>8.4f} {'-':>7} {0.6451:>10.4f}  "
              "vector, one item per doc (MTEB protocol)")
    for rule, ndcg in ablations.items():
        print(f"hybrid with {rule}={RULE_SETTINGS[rule]}: nDCG@10 {ndcg:.4f}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "scifact", "date": time.strftime("%Y-%m-%d %H:%M"),
        "queries": len(qrels), "docs": len(corpus), "index": index_info, "metrics": metrics,
        "direct_one_vector_ndcg@10": direct, "settings": overrides, "ablations": ablations,
        "reference": {k: v[1] for k, v in REFERENCE.items()}, "command": " ".join(sys.argv),
    }
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"\nwrote {args.out}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
