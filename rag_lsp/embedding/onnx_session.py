"""An onnxruntime session of the model and one pooled model call: shared by the embedder and
the bulk worker process (``bulk_worker.py``), which imports nothing else of rag-lsp's."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

# onnxruntime's Linux wheels carry Microsoft's 1DS telemetry, which resolves and posts to
# mobile.events.data.microsoft.com from a native thread (disable_telemetry_events() does not
# stop it). This variable, read when the library loads, does: no network, as promised. A user
# who sets it themselves keeps their value.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import onnxruntime as ort  # noqa: E402 - after the variable above


def new_session(onnx_path: str, threads: int, *, spinning: bool) -> ort.InferenceSession:
    """A session on ``threads`` threads. ``spinning``: its threads busy-wait between calls,
    which speeds up back-to-back batches but would keep both cores busy for a while after
    each lone query (slowing the index lookups that follow it by ~15 ms on two cores).
    onnxruntime raises several types for a graph it cannot load; callers say what to do."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # No memory patterns: with them onnxruntime plans one block for each input shape it meets,
    # and indexing's batches come in hundreds of shapes (texts x longest text); the arena grew
    # to hold the largest plans. Without, each tensor takes its place in the arena and gives it
    # back: the embedding child peaked 188-189 MB instead of 205-208 on the same 1,200 texts,
    # with the same vectors and speed (bench/model_memory.py).
    options.enable_mem_pattern = False
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])


def arena_given_back() -> ort.RunOptions:
    """Options for a call after which the session hands back what its arena grew by for it
    (onnxruntime otherwise keeps its arena at the largest call's size for its lifetime)."""
    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


def padded(ids_list: Sequence[Sequence[int] | np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask of a batch, padded to its longest member."""
    longest = max(len(ids) for ids in ids_list)
    input_ids = np.zeros((len(ids_list), longest), dtype=np.int64)
    mask = np.zeros_like(input_ids)
    for row, ids in enumerate(ids_list):
        input_ids[row, : len(ids)] = ids
        mask[row, : len(ids)] = 1
    return input_ids, mask


def run_pooled(session: ort.InferenceSession, input_ids: np.ndarray, mask: np.ndarray,
               options: ort.RunOptions | None = None) -> np.ndarray:
    """One model call: mean over real tokens only, then unit length (cosine similarity
    becomes a dot product), exactly as sentence-transformers does."""
    feeds = {"input_ids": input_ids, "attention_mask": mask}
    if "token_type_ids" in {i.name for i in session.get_inputs()}:
        feeds["token_type_ids"] = np.zeros_like(input_ids)
    hidden = session.run(None, feeds, options)[0]
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.clip(norms, 1e-12, None)
