"""For ``bench/server_latency.py --model-sleep``: loaded by the server it starts (this folder
first on its ``PYTHONPATH``), never by rag-lsp itself.

With ``RAG_LSP_BENCH_MODEL_SLEEP`` set to a number of seconds, every bulk embedding of the
server (index runs, edits' updates, a first index) runs no model: each batch waits its turn
as before (searches first), then sleeps that long a text and hands back stand-in vectors
(drawn from a hash of each text's token ids), and no model child process is started. Search
queries still run the model. So an index run keeps its pace, its reads, chunking, writes and
in-memory patches, without the model's work on the other core: what a re-index costs
searches with the model's part taken out. Once patched, it says so on stderr and writes the
file ``RAG_LSP_BENCH_MODEL_SLEEP_MARK`` names, if set: Python reports an error in
``sitecustomize`` on stderr and starts all the same, so the bench checks for that file.

Python runs ``sitecustomize`` at start-up, before anything else imports; the embedder is
patched when it is first imported, so the server sets itself up (allocators, BLAS threads)
in the order it always does. A ``sitecustomize`` later on the path (some system Pythons ship
one) is not run while this one is first.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
import time

VARIABLE = "RAG_LSP_BENCH_MODEL_SLEEP"
MARK_VARIABLE = "RAG_LSP_BENCH_MODEL_SLEEP_MARK"
EMBEDDER_MODULE = "rag_lsp.embedding.embedder"


def pace(embedder_class: type, seconds_a_text: float) -> None:
    """Make ``embedder_class`` (``OnnxEmbedder``) embed in bulk by sleeping, as the module's
    docstring says."""
    import numpy as np

    def take_bulk(self):  # noqa: ANN001, ANN202 - no child process to take
        return None

    def put_bulk(self) -> None:  # noqa: ANN001
        return None

    def run_bulk(self, bulk, ids, before_batch):  # noqa: ANN001, ANN202
        if before_batch is not None:
            before_batch()  # searches first, as the real call
        time.sleep(seconds_a_text * len(ids))
        out = np.empty((len(ids), self.dimension), dtype=np.float32)
        for row, token_ids in enumerate(ids):
            digest = hashlib.blake2b(np.asarray(token_ids, dtype=np.int32).tobytes(),
                                     digest_size=8).digest()
            vector = np.random.default_rng(int.from_bytes(digest, "little")).standard_normal(
                self.dimension)
            out[row] = vector / np.linalg.norm(vector)
        return out

    embedder_class._take_bulk = take_bulk
    embedder_class._put_bulk = put_bulk
    embedder_class._run_bulk = run_bulk


def paced(module, seconds_a_text: float, environ: dict[str, str]) -> None:  # noqa: ANN001
    """Pace the embedder ``module`` holds, and say so (stderr, and the mark file if named)."""
    pace(module.OnnxEmbedder, seconds_a_text)
    print(f"bench/paced_model: bulk embedding sleeps {seconds_a_text} s a text, no model",
          file=sys.stderr)
    mark = environ.get(MARK_VARIABLE)
    if mark:
        with open(mark, "w", encoding="ascii") as handle:
            handle.write(f"{os.getpid()}\n")


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches the embedder's module right after it runs."""

    def __init__(self, seconds_a_text: float, environ: dict[str, str]):
        self.seconds_a_text = seconds_a_text
        self.environ = environ

    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name != EMBEDDER_MODULE:
            return None
        sys.meta_path.remove(self)  # find the real module, once
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module) -> None:  # noqa: ANN001
            run_module(module)
            paced(module, self.seconds_a_text, self.environ)

        spec.loader.exec_module = exec_module
        return spec


def install(environ: dict[str, str] = os.environ) -> bool:
    """Patch the embedder when it is imported, if ``RAG_LSP_BENCH_MODEL_SLEEP`` is set.
    Whether it will."""
    value = environ.get(VARIABLE)
    if not value:
        return False
    seconds = float(value)
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"{VARIABLE} must be seconds, 0 or more: got {value!r}")
    if EMBEDDER_MODULE in sys.modules:  # imported already (not at a process's start-up)
        paced(sys.modules[EMBEDDER_MODULE], seconds, environ)
    else:
        sys.meta_path.insert(0, _PatchOnImport(seconds, environ))
    return True


install()
