"""Sentence embeddings from the ONNX export of all-MiniLM-L6-v2 on onnxruntime."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from rag_lsp.embedding.bulk_worker import BatchInterrupted, BulkWorker, Children, WorkerExited
from rag_lsp.embedding.model_files import (
    ModelFiles,
    find_model,
    load_manifest,
    verify_files,
    verify_query_model,
)
from rag_lsp.embedding.onnx_session import arena_given_back, new_session, ort, padded, run_pooled
from rag_lsp.embedding.tokenizer import MAX_MODEL_TOKENS, load_tokenizer
from rag_lsp.errors import ModelIntegrityError
from rag_lsp.memory import return_freed_memory

log = logging.getLogger(__name__)

QUERY_CACHE_SIZE = 512  # query vectors kept (1.5 KB each)
# The query's session keeps the memory its longest query took: after queries of 150-256
# word-pieces (a pasted snippet or stack trace) a server held ~13 MB more for the rest of its
# life. Queries longer than this hand that back as they end; typed ones, shorter, reuse what
# the session holds (bench/model_memory.py).
QUERY_ARENA_KEPT_TOKENS = 64

DEFAULT_BATCH_SIZE = 32
# Padded tokens per model call. On a 2-core CPU, calls of ~1k tokens beat larger ones
# (bench/embed_throughput.py: ~10% over fixed batches of 16), so long texts go 4 at a time
# and short ones up to the batch size.
MAX_BATCH_TOKENS = 1024
# Texts per tokenizer call in embed(): only their ids are kept (int32 arrays) while the model
# embeds the batch, so at most one slice's full encodings (each word-piece's text, offsets and
# masks) exist at once, a few MB, and the tokenizer still gets enough texts a call. Not tuned;
# what the encodings of a whole batch held: bench/README.md, "A batch's texts held as their
# word-piece ids".
TOKENIZE_SLICE = 128
# The session that embeds in bulk (indexing) holds ~135 MB and its arena ~60–110 MB more: it
# is let go after this long unused, so a server whose index is current does not keep it, and
# made again by the next batch.
BULK_IDLE_SECONDS = 60.0
EXITING = "the embedding process was ended: rag-lsp is exiting"


def _query_model(files: ModelFiles, verify: bool) -> Path:
    """The query model when the folder has one that checks out, else ``model.onnx`` (with a
    warning: searches still work, with the full model's memory)."""
    if files.query_onnx_path is None:
        return files.onnx_path
    if verify:
        try:
            verify_query_model(files)
        except ModelIntegrityError as exc:
            log.warning("%s; search queries use %s instead", exc, files.onnx_path.name)
            return files.onnx_path
    return files.query_onnx_path


class _SessionRunner:
    """The bulk session in this process (the ``rag-lsp index`` command, library use)."""

    def __init__(self, session: ort.InferenceSession, threads: int):
        self.session = session
        self.threads = threads
        self._lock = threading.Lock()
        self._runs: set[ort.RunOptions] = set()

    def run(self, ids_list: Sequence[Sequence[int] | np.ndarray], *,
            interruptible: bool) -> np.ndarray:
        input_ids, mask = padded(ids_list)
        if not interruptible:
            return run_pooled(self.session, input_ids, mask)
        options = ort.RunOptions()
        with self._lock:
            self._runs.add(options)
        try:
            return run_pooled(self.session, input_ids, mask, options)
        except Exception:
            if options.terminate:
                raise BatchInterrupted from None
            raise
        finally:
            with self._lock:
                self._runs.discard(options)

    def interrupt(self) -> None:
        with self._lock:
            for options in self._runs:
                options.terminate = True

    def close(self) -> None:
        self.session = None  # type: ignore[assignment]  # (its memory goes with it)


BulkRunner = _SessionRunner | BulkWorker


class OnnxEmbedder:
    """Turns texts into L2-normalised 384-d vectors, exactly as sentence-transformers does.

    Texts are tokenised once, sorted by length and batched so each batch pads only to its
    own longest member: indexing time is almost all embedding, and padding is wasted work.
    A batch holds at most ``batch_size`` texts and ``max_batch_tokens`` padded tokens.

    Search queries go through the query model (8-bit weights, see
    ``models/quantize_query_model.py``) when the folder has one that checks out: ~60 MB less
    memory for a server, the same rankings as measured. Otherwise, and when ``exact_queries``,
    through ``model.onnx`` like documents.

    ``threads`` (default: every core) serves search queries; ``index_threads`` (default:
    ``threads``) caps the session that embeds in bulk, so indexing can leave a core to the
    editor while a search still gets them all. ``bulk_in_child`` runs that session in a child
    process (``bulk_worker.py``): for a long-running server, whose memory it would be.
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
        bulk_in_child: bool = False,
        exact_queries: bool = False,
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
        # The graph search queries run through (see _query_model)
        self.query_onnx_path: Path = (files.onnx_path if exact_queries
                                      else _query_model(files, verify))
        self._tokenizer = load_tokenizer(files.tokenizer_path, MAX_MODEL_TOKENS)
        # Batches are padded by _run; the tokenizer is never reconfigured after this, so
        # indexing and search threads can share it.
        self._tokenizer.no_padding()
        self.threads = threads or os.cpu_count() or 1
        self.index_threads = index_threads or self.threads
        # (POSIX only: the child's stop pipe is passed as an inherited descriptor.)
        self.bulk_in_child = bulk_in_child and os.name == "posix"
        self._query_session: ort.InferenceSession | None = None
        self._query_session_lock = threading.Lock()
        self._bulk: BulkRunner | None = None
        self._bulk_lock = threading.Lock()
        self._bulk_users = 0
        self._bulk_last_used = time.monotonic()
        self._bulk_timer: threading.Timer | None = None
        # Counts close() calls: a child started again after a set-aside gives up if the
        # session was let go meanwhile (see bulk_session_set_aside).
        self._bulk_closes = 0
        self._children = Children()  # this embedder's, to end at shut_down
        # Loading a session now checks the model: the bulk one (unused, it goes after a
        # while), or with the bulk session in a child, the query's, which a server makes
        # anyway.
        if self.bulk_in_child:
            self._query_session_ready()
        else:
            self._bulk = self._new_bulk()
            self._release_bulk_later(BULK_IDLE_SECONDS)
        # Typing in a search box asks the same query again and again (a pause, a backspace):
        # its vector is kept, most recently used last.
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_vectors_lock = threading.Lock()

    def _new_session(self, threads: int, *, spinning: bool,
                     onnx_path: Path | None = None) -> ort.InferenceSession:
        """A session of ``onnx_path`` (default: ``model.onnx``) on ``threads`` threads (see
        :func:`new_session`)."""
        onnx_path = onnx_path or self.files.onnx_path
        try:
            session = new_session(str(onnx_path), threads, spinning=spinning)
        except Exception as exc:  # onnxruntime raises several types for unreadable graphs
            raise ModelIntegrityError(
                f"onnxruntime cannot load {onnx_path} ({exc}). Run "
                "`rag-lsp model install --force`, or point modelDir at a valid export."
            ) from exc
        # Loading parsed the whole model file (~90 MB) into buffers freed once the session
        # holds its weights; glibc keeps them resident unless told (−29 MB measured).
        return_freed_memory()
        return session

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
        token_ids = self._token_ids(texts)
        lengths = [len(ids) for ids in token_ids]
        bulk = self._take_bulk()
        try:
            for batch in self._batches(lengths, size):
                ids = [token_ids[i] for i in batch]
                try:
                    out[batch] = self._run_bulk(bulk, ids, before_batch)
                except WorkerExited as exc:  # killed (out of memory?): once more, in a new one
                    log.warning("%s; starting another", exc)
                    bulk = self._replace_bulk(bulk)
                    out[batch] = self._run_bulk(bulk, ids, before_batch)
                if on_batch is not None:
                    on_batch(len(batch))
        finally:
            self._put_bulk()
        return out

    def _token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's word-piece ids as an int32 array, tokenized TOKENIZE_SLICE texts at a
        time, so that only one slice's encodings exist at once: an indexing batch's texts
        stay tokenized until the model has embedded them all."""
        texts = list(texts)
        ids: list[np.ndarray] = []
        for start in range(0, len(texts), TOKENIZE_SLICE):
            ids.extend(np.asarray(encoding.ids, dtype=np.int32) for encoding in
                       self._tokenizer.encode_batch(texts[start:start + TOKENIZE_SLICE]))
        return ids

    def _run_bulk(self, bulk: BulkRunner, ids: list[np.ndarray],
                  before_batch: Callable[[], None] | None) -> np.ndarray:
        if before_batch is None:
            return bulk.run(ids, interruptible=False)
        before_batch()
        try:
            return bulk.run(ids, interruptible=True)
        except BatchInterrupted:
            pass
        # Interrupted once: the retry is not interruptible, so a steady stream of searches
        # slows indexing down but can never stall it.
        before_batch()
        return bulk.run(ids, interruptible=False)

    # ---- the bulk session: made when needed, let go when idle ------------------------------

    def _new_bulk(self) -> BulkRunner:
        if self.bulk_in_child:
            if self._children.ended:
                raise WorkerExited(EXITING)
            try:
                return BulkWorker(self.files.onnx_path, self.index_threads, self.dimension,
                                  self._children)
            except WorkerExited as exc:  # (a broken model raises ModelIntegrityError)
                if self._children.ended:  # ended as it loaded
                    raise WorkerExited(EXITING) from exc
                if exc.killed:  # as it started (out of memory?): a child again next time
                    log.warning("%s; these model calls run in this process", exc)
                else:  # a child cannot run here (a sandbox, a frozen executable)
                    log.warning("%s; indexing's model calls run in this process instead", exc)
                    self.bulk_in_child = False
        return _SessionRunner(self._new_session(self.index_threads, spinning=True),
                              self.index_threads)

    def _take_bulk(self) -> BulkRunner:
        with self._bulk_lock:
            self._bulk_users += 1
            if self._bulk is None:
                try:
                    self._bulk = self._new_bulk()
                except BaseException:
                    self._bulk_users -= 1
                    raise
            return self._bulk

    def _replace_bulk(self, broken: BulkRunner) -> BulkRunner:
        with self._bulk_lock:
            if self._bulk is broken:
                self._bulk = None
        broken.close()
        with self._bulk_lock:
            if self._bulk is None:
                self._bulk = self._new_bulk()
            return self._bulk

    def _put_bulk(self) -> None:
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
            if self._bulk_users or self._bulk is None:
                return
            idle = time.monotonic() - self._bulk_last_used
            if idle < BULK_IDLE_SECONDS:  # used again meanwhile: wait for the rest
                self._release_bulk_later(BULK_IDLE_SECONDS - idle)
                return
            bulk, self._bulk = self._bulk, None
        bulk.close()
        return_freed_memory()

    def shut_down(self, grace_seconds: float = 0.0) -> None:
        """The process is exiting: end the child, mid-batch or loading too (a stopped or stuck
        one kept the server alive after ``exit`` until its call timed out), and start none
        again; after ``grace_seconds``, so that a write under way can finish as it always
        did (a daemon timer: a process gone by then is not held). Takes no lock: a child
        loading holds ``_bulk_lock`` until it is ready."""
        if grace_seconds <= 0:
            self._children.end_all()
            return
        timer = threading.Timer(grace_seconds, self._children.end_all)
        timer.daemon = True
        timer.start()

    @property
    def holds_bulk_session(self) -> bool:
        return self._bulk is not None

    def close(self) -> bool:
        """Let go of the bulk session now unless a batch is using it (with ``bulk_in_child``,
        end the child; in this process, hand its memory back); the next batch makes it again.
        Whether there was one to let go."""
        with self._bulk_lock:
            self._bulk_closes += 1
            if self._bulk_users or self._bulk is None:
                return False
            bulk, self._bulk = self._bulk, None
        bulk.close()
        if not isinstance(bulk, BulkWorker):
            return_freed_memory()
        return True

    @contextmanager
    def bulk_session_set_aside(self) -> Iterator[None]:
        """Around a step that needs the memory more than an idle bulk session does (the ANN
        index trained again and the compaction after it: past 50k chunks a process of their own
        holding ~250 MB at 100k, see rag_lsp.store.retraining, beside this child's ~226): the
        session is let go first unless a batch is using it, and a child is started again
        after, in the background, so the next batch (a run's, an edit's) does not wait
        ~0.6 s for one. A session in this process is made again only by the next batch.
        (Folders of one server share the embedder: a batch of another folder during the step
        starts a child of its own.)"""
        # Never the step's failure: an error here is logged, and the step runs regardless
        # (a caller such as ChunkStore.optimize reports its own errors as a damaged index).
        try:
            released = self.close()
        except Exception:
            log.warning("could not let the embedding session go", exc_info=True)
            released = False
        closes = self._bulk_closes  # a close() after this one: the restart gives up
        try:
            yield
        finally:
            if released and self.bulk_in_child:
                try:
                    threading.Thread(target=self._restart_bulk, args=(closes,),
                                     name="rag-lsp-bulk-restart", daemon=True).start()
                except RuntimeError as exc:  # no thread to be had: the next batch starts it
                    log.debug("embedding process not started again: %s", exc)

    def _restart_bulk(self, closes: int) -> None:
        """Start the child again, unless a batch did already or the session was let go
        since (``closes`` is the count of close() calls the set-aside saw). Only a child: if
        one cannot start, the next batch finds out (and falls back to this process)."""
        with self._bulk_lock:
            if self._bulk is not None or self._bulk_closes != closes or self._children.ended:
                return
            try:
                self._bulk = BulkWorker(self.files.onnx_path, self.index_threads, self.dimension,
                                        self._children)
            except Exception as exc:
                log.debug("embedding process not started again: %s", exc)
                return
            self._bulk_last_used = time.monotonic()  # the idle clock starts: unused, it goes
            if self._bulk_timer is not None:
                self._bulk_timer.cancel()
            self._release_bulk_later(BULK_IDLE_SECONDS)

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
        vector = self._run([ids], session=self._query_session_ready(),
                           options=arena_given_back() if len(ids) > QUERY_ARENA_KEPT_TOKENS
                           else None)[0]
        vector.setflags(write=False)  # shared by every search of this text
        with self._query_vectors_lock:
            self._query_vectors[text] = vector
            while len(self._query_vectors) > QUERY_CACHE_SIZE:
                self._query_vectors.popitem(last=False)
        return vector

    def _query_session_ready(self) -> ort.InferenceSession:
        with self._query_session_lock:
            if self._query_session is None:
                self._query_session = self._new_query_session()
            return self._query_session

    def _new_query_session(self) -> ort.InferenceSession:
        if self.query_onnx_path != self.files.onnx_path:
            try:
                return self._new_session(self.threads, spinning=False,
                                         onnx_path=self.query_onnx_path)
            except ModelIntegrityError as exc:  # (an onnxruntime without 8-bit MatMulNBits)
                log.warning("%s; search queries use %s instead", exc, self.files.onnx_path.name)
                self.query_onnx_path = self.files.onnx_path
        return self._new_session(self.threads, spinning=False)

    def warm_up(self) -> None:
        """Create the query session and run it once (~150 ms on two cores), so that a first
        search does not pay for it; nothing to do once it exists."""
        if self._query_session is None:
            self._run([self._tokenizer.encode_batch(["warm up"])[0].ids],
                      session=self._query_session_ready())

    def interrupt_background(self) -> None:
        """Stop the background batch running now (it is retried): a search has come in, and
        on a small machine it should not share the cores with indexing."""
        bulk = self._bulk
        if bulk is not None:
            bulk.interrupt()

    def _run(self, ids_list: list[list[int]], *, session: ort.InferenceSession,
             options: ort.RunOptions | None = None) -> np.ndarray:
        return run_pooled(session, *padded(ids_list), options)
