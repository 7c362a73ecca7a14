"""Sentence embeddings from the ONNX export of all-MiniLM-L6-v2 on onnxruntime."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

# onnxruntime's Linux wheels carry Microsoft's 1DS telemetry, which resolves and posts to
# mobile.events.data.microsoft.com from a native thread (disable_telemetry_events() does not
# stop it). This variable, read when the library loads, does: no network, as promised. A user
# who sets it themselves keeps their value.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import onnxruntime as ort  # noqa: E402 - after the variable above

from rag_lsp.embedding.model_files import ModelFiles, find_model, load_manifest, verify_files
from rag_lsp.embedding.tokenizer import MAX_MODEL_TOKENS, load_tokenizer
from rag_lsp.errors import ModelIntegrityError
from rag_lsp.memory import return_freed_memory

QUERY_CACHE_SIZE = 512  # query vectors kept (1.5 KB each)

DEFAULT_BATCH_SIZE = 32
# Padded tokens per model call. On a 2-core CPU, calls of ~1k tokens beat larger ones
# (bench/embed_throughput.py: ~10% over fixed batches of 16), so long texts go 4 at a time
# and short ones up to the batch size.
MAX_BATCH_TOKENS = 1024
# The session that embeds in bulk (indexing) holds ~110 MB: it is loaded with the model (which
# checks the model), let go after this long unused, so a server whose index is current does
# not keep it, and made again by the next batch.
BULK_IDLE_SECONDS = 60.0


class OnnxEmbedder:
    """Turns texts into L2-normalised 384-d vectors, exactly as sentence-transformers does.

    Texts are tokenised once, sorted by length and batched so each batch pads only to its
    own longest member: indexing time is almost all embedding, and padding is wasted work.
    A batch holds at most ``batch_size`` texts and ``max_batch_tokens`` padded tokens.

    ``threads`` (default: every core) serves search queries; ``index_threads`` (default:
    ``threads``) caps the session that embeds in bulk, so indexing can leave a core to the
    editor while a search still gets them all.
    """

    def __init__(
        self,
        files: ModelFiles,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
        threads: int | None = None,
        index_threads: int | None = None,
        verify: bool = True,
    ):
        manifest = load_manifest()
        self.files = files
        self.model_id: str = manifest["model_id"]
        self.dimension: int = int(manifest["dimension"])
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        hashes = verify_files(files) if verify else {}
        self.model_sha256: str = hashes.get("model.onnx", "")
        self.tokenizer_sha256: str = hashes.get("tokenizer.json", "")
        self._tokenizer = load_tokenizer(files.tokenizer_path, MAX_MODEL_TOKENS)
        # Batches are padded by _run; the tokenizer is never reconfigured after this, so
        # indexing and search threads can share it.
        self._tokenizer.no_padding()
        self.threads = threads or os.cpu_count() or 1
        self.index_threads = index_threads or self.threads
        # Loading the bulk session now checks the model; unused, it goes after a while.
        self._bulk_session: ort.InferenceSession | None = self._new_session(
            self.index_threads, spinning=True)
        self._bulk_lock = threading.Lock()
        self._bulk_users = 0
        self._bulk_last_used = time.monotonic()
        self._bulk_timer: threading.Timer | None = None
        self._release_bulk_later(BULK_IDLE_SECONDS)
        self._query_session: ort.InferenceSession | None = None
        self._query_session_lock = threading.Lock()
        # Typing in a search box asks the same query again and again (a pause, a backspace):
        # its vector is kept, most recently used last.
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_vectors_lock = threading.Lock()
        self._input_names = {i.name for i in self._bulk_session.get_inputs()}
        self._background_lock = threading.Lock()
        self._background_runs: set[ort.RunOptions] = set()

    def _new_session(self, threads: int, *, spinning: bool) -> ort.InferenceSession:
        """A session on ``threads`` threads. ``spinning``: its threads busy-wait between calls,
        which speeds up back-to-back batches but would keep both cores busy for a while after
        each lone query (slowing the index lookups that follow it by ~15 ms on two cores)."""
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if not spinning:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(
                str(self.files.onnx_path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises several types for unreadable graphs
            raise ModelIntegrityError(
                f"onnxruntime cannot load {self.files.onnx_path} ({exc}). Run "
                "`rag-lsp model install --force`, or point modelDir at a valid export."
            ) from exc

    @classmethod
    def load(cls, model_dir: str | None = None, **kwargs) -> OnnxEmbedder:
        """Find the model (see :func:`find_model`) and load it."""
        return cls(find_model(model_dir), **kwargs)

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Word-pieces per text as the model sees them (special tokens included, truncated)."""
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    def embed(
        self,
        texts: Sequence[str],
        *,
        batch_size: int | None = None,
        on_batch: Callable[[int], None] | None = None,
        before_batch: Callable[[], None] | None = None,
    ) -> np.ndarray:
        """Embed ``texts``; returns float32 ``(len(texts), dimension)``, rows L2-normalised.

        ``on_batch(n)`` is called after each batch with the number of texts just embedded.
        With ``before_batch`` the call is background work (indexing): ``before_batch()`` runs
        before each batch (to let searches go first), and :meth:`interrupt_background` may
        stop a batch mid-way, which is then run again after ``before_batch()``.
        """
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        size = batch_size or self.batch_size
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encodings]
        session = self._take_bulk_session()
        try:
            for batch in self._batches(lengths, size):
                ids = [encodings[i].ids for i in batch]
                if before_batch is None:
                    out[batch] = self._run(ids, session=session)
                else:
                    out[batch] = self._run_in_background(ids, before_batch, session)
                if on_batch is not None:
                    on_batch(len(batch))
        finally:
            self._put_bulk_session()
        return out

    # ---- the bulk session: made when needed, let go when idle ------------------------------

    def _take_bulk_session(self) -> ort.InferenceSession:
        with self._bulk_lock:
            self._bulk_users += 1
            if self._bulk_session is None:
                try:
                    self._bulk_session = self._new_session(self.index_threads, spinning=True)
                except BaseException:
                    self._bulk_users -= 1
                    raise
            return self._bulk_session

    def _put_bulk_session(self) -> None:
        with self._bulk_lock:
            self._bulk_users -= 1
            self._bulk_last_used = time.monotonic()
            if self._bulk_users == 0:  # the idle clock starts again
                if self._bulk_timer is not None:
                    self._bulk_timer.cancel()
                self._release_bulk_later(BULK_IDLE_SECONDS)

    def _release_bulk_later(self, delay: float) -> None:
        self._bulk_timer = threading.Timer(delay, self._release_idle_bulk)
        self._bulk_timer.daemon = True
        self._bulk_timer.start()

    def _release_idle_bulk(self) -> None:
        with self._bulk_lock:
            self._bulk_timer = None
            if self._bulk_users or self._bulk_session is None:
                return
            idle = time.monotonic() - self._bulk_last_used
            if idle < BULK_IDLE_SECONDS:  # used again meanwhile: wait for the rest
                self._release_bulk_later(BULK_IDLE_SECONDS - idle)
                return
            self._bulk_session = None
        return_freed_memory()

    @property
    def holds_bulk_session(self) -> bool:
        return self._bulk_session is not None

    def _batches(self, lengths: list[int], size: int) -> list[list[int]]:
        """Indices sorted by length, cut into batches within the size and token budget."""
        batches: list[list[int]] = []
        current: list[int] = []
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            # Sorted ascending, so this text sets the padded length of the whole batch.
            if current and (
                len(current) == size or (len(current) + 1) * lengths[i] > self.max_batch_tokens
            ):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def embed_query(self, text: str) -> np.ndarray:
        """One search query's vector, from a session of its own that does not spin (see
        :meth:`_new_session`) and never waits behind an indexing batch."""
        with self._query_vectors_lock:
            known = self._query_vectors.get(text)
            if known is not None:
                self._query_vectors.move_to_end(text)
                return known
        ids = self._tokenizer.encode_batch([text])[0].ids
        vector = self._run([ids], session=self._query_session_ready())[0]
        vector.setflags(write=False)  # shared by every search of this text
        with self._query_vectors_lock:
            self._query_vectors[text] = vector
            while len(self._query_vectors) > QUERY_CACHE_SIZE:
                self._query_vectors.popitem(last=False)
        return vector

    def _query_session_ready(self) -> ort.InferenceSession:
        with self._query_session_lock:
            if self._query_session is None:
                self._query_session = self._new_session(self.threads, spinning=False)
            return self._query_session

    def warm_up(self) -> None:
        """Create the query session and run it once (~150 ms on two cores), so that a first
        search does not pay for it; nothing to do once it exists."""
        if self._query_session is None:
            self._run([self._tokenizer.encode_batch(["warm up"])[0].ids],
                      session=self._query_session_ready())

    def interrupt_background(self) -> None:
        """Stop the background batches running now (they are retried): a search has come in,
        and on a small machine it should not share the cores with indexing."""
        with self._background_lock:
            for options in self._background_runs:
                options.terminate = True

    def _run_in_background(self, ids: list[list[int]], before_batch: Callable[[], None],
                           session: ort.InferenceSession) -> np.ndarray:
        before_batch()
        options = ort.RunOptions()
        with self._background_lock:
            self._background_runs.add(options)
        try:
            return self._run(ids, options, session=session)
        except Exception:
            if not options.terminate:
                raise
        finally:
            with self._background_lock:
                self._background_runs.discard(options)
        # Interrupted once: the retry is not interruptible, so a steady stream of searches
        # slows indexing down but can never stall it.
        before_batch()
        return self._run(ids, session=session)

    def _run(self, ids_list: list[list[int]], options: ort.RunOptions | None = None, *,
             session: ort.InferenceSession) -> np.ndarray:
        longest = max(len(ids) for ids in ids_list)
        input_ids = np.zeros((len(ids_list), longest), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for row, ids in enumerate(ids_list):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        hidden = session.run(None, feeds, options)[0]
        # Mean over real tokens only, then unit length: cosine similarity becomes a dot product.
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)
