"""The engine API: open a workspace's index, keep it current, search it, report status.

Both the CLI and the language server use this; nothing here knows about either.

    from rag_lsp import Workspace
    ws = Workspace.open("path/to/repo")
    ws.index()
    for hit in ws.search("where are redirects followed?").results:
        print(hit.path, hit.start_line, hit.end_line, hit.score)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from rag_lsp.blas_threads import use_one_blas_thread
from rag_lsp.chunking import CHUNKER_VERSION
from rag_lsp.config import Settings, load_settings
from rag_lsp.embedding.embedder import OnnxEmbedder
from rag_lsp.embedding.model_files import find_model
from rag_lsp.embedding.shared_cache import EmbeddingCache, open_shared, user_cache_dir
from rag_lsp.embedding.tokenizer import ModelTokenCounter
from rag_lsp.errors import (
    BadInputError,
    IndexBusyError,
    IndexCorruptError,
    ModelIntegrityError,
    ModelNotFoundError,
    RagLspError,
    WorkspaceClosedError,
)
from rag_lsp.indexing.file_text import draft_saved
from rag_lsp.indexing.indexer import Indexer
from rag_lsp.indexing.progress import IndexProgress, IndexReport, ProgressCallback
from rag_lsp.indexing.scan import WorkspaceFilter
from rag_lsp.knowledge import KnowledgeBase
from rag_lsp.memory import after_work
from rag_lsp.priority import SearchFirst
from rag_lsp.search.calibration import BackgroundCache
from rag_lsp.search.filter_check import normalised, nothing_matches
from rag_lsp.search.pipeline import SearchIndex, search_chunks, search_files
from rag_lsp.search.ranking import RankingWeights
from rag_lsp.search.results import (
    MODES,
    ChunkHit,
    SearchFilters,
    SearchResponse,
    SearchResult,
    SearchTimings,
)
from rag_lsp.store.compaction_times import CompactionTimes
from rag_lsp.store.draft import DraftIndex
from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.store.live_index import LiveIndex
from rag_lsp.store.manifest import SCHEMA_VERSION, IndexManifest, without_rebuild_hint
from rag_lsp.store.private import refuse_index_links
from rag_lsp.store.sql import all_of, quote
from rag_lsp.store.staging import discard, fresh_staging, swap_under_way
from rag_lsp.store.stored_places import STORED_COLUMNS, read_stored
from rag_lsp.store.writer_lock import LockOwner

log = logging.getLogger(__name__)
T = TypeVar("T")

# Said with every progress step of a full rebuild made beside the live index.
REBUILD_NOTE = "searches use the current index until the rebuild is done"


@dataclass
class WorkspaceStatus:
    root: str
    index_dir: str
    indexed: bool
    files: int
    chunks: int
    model_id: str
    model_sha256: str
    dimension: int
    last_indexed_at: str | None
    degraded_reason: str | None = None  # why only lexical search works, if it does
    embedding_cache: str | None = None  # the shared cache's file, when it is on
    # New files a run of this process has not embedded yet, searchable by their words only
    # (see rag_lsp.store.draft).
    drafted_files: int = 0
    index_problem: str | None = None  # why the index cannot be read, and the fix

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _with_note(progress: ProgressCallback | None, note: str) -> ProgressCallback | None:
    if progress is None:
        return None
    return lambda event: progress(replace(event, note=note))


def load_embedder(
    settings: Settings, root: Path | None = None, *, bulk_in_child: bool = False
) -> tuple[OnnxEmbedder | None, RagLspError | None]:
    """The embedding model for ``settings``, or ``None`` and the reason it cannot be used.
    ``bulk_in_child``: indexing's model calls run in a child process (for a server, see
    ``embedding/bulk_worker.py``)."""
    try:
        model_dir = settings.model_path(root) if root is not None else settings.model_dir
        return OnnxEmbedder(find_model(model_dir), batch_size=settings.embed_batch_size,
                            index_threads=settings.indexing_threads(),
                            bulk_in_child=bulk_in_child,
                            exact_queries=settings.exact_queries), None
    except (ModelNotFoundError, ModelIntegrityError) as exc:
        log.warning("embedding model unavailable, lexical search only: %s", exc)
        return None, exc


class Workspace:
    """One workspace folder and its on-disk index.

    Without a usable model (``embedder`` is ``None``, ``model_error`` says why) the workspace
    is *degraded*: an existing index still answers lexical searches, and says so; indexing
    raises ``model_error``, whose message tells how to get the model.
    """

    def __init__(
        self,
        root: Path,
        settings: Settings,
        embedder: OnnxEmbedder | None,
        model_error: RagLspError | None = None,
        priority: SearchFirst | None = None,
    ):
        self.root = root
        self.settings = settings
        self.embedder = embedder
        self.model_error = model_error
        self.index_dir = settings.index_dir(root)
        refuse_index_links(root, self.index_dir, default=settings.index_path is None)
        self._counter = ModelTokenCounter(embedder.files.tokenizer_path) if embedder else None
        self._index_lock = threading.Lock()
        # The build of the index this object reads, the tables lock every read and every
        # drop or swap holds (searches are serialised), and the writer lock: one writer per
        # index across processes (and across Workspace objects in one).
        self._index = LiveIndex(self.index_dir, root, embedder, model_error)
        self._writer = self._index.writer
        self._rebuilding_beside = threading.Event()
        self._closed = threading.Event()
        # Shared with other workspaces of the process: searches go ahead of embedding batches.
        self.priority = priority or SearchFirst()
        if embedder is not None:  # an indexing batch stops the moment a search starts
            self.priority.on_search(embedder.interrupt_background)
        self._knowledge: KnowledgeBase | None = None
        # What the index looks like, for calibration; made again for each build's tables.
        self._background = BackgroundCache()
        self._background_of: ChunkStore | None = None
        # New files by their words while a run embeds them (searched beside the index).
        self._draft = DraftIndex() if settings.lexical_first else None

    @classmethod
    def open(
        cls,
        root: str | Path,
        settings: Settings | None = None,
        *,
        embedder: OnnxEmbedder | None = None,
        model_error: RagLspError | None = None,
        priority: SearchFirst | None = None,
        bulk_in_child: bool = False,
    ) -> Workspace:
        """Open ``root`` with its ``.rag-lsp.json`` settings (or ``settings``) and the model.

        A caller that already loaded the model (or failed to: ``model_error``) passes it in,
        so several workspaces share one; otherwise it is loaded here (``bulk_in_child``: see
        :func:`load_embedder`). Raises :class:`~rag_lsp.errors.RagLspError`
        subclasses with a message saying how to fix what is wrong (missing model, invalid
        settings).
        """
        root_path = Path(root).expanduser().resolve()
        if not root_path.is_dir():
            raise RagLspError(f"workspace root {root_path} is not a directory")
        settings = settings or load_settings(root_path)
        if settings.index_path and "://" in settings.index_path:
            raise RagLspError(
                f"`indexPath` = {settings.index_path!r}: object-store indexes are not supported "
                "yet; use a local folder."
            )
        if embedder is None and model_error is None:
            embedder, model_error = load_embedder(settings, root_path,
                                                  bulk_in_child=bulk_in_child)
        use_one_blas_thread()
        return cls(root_path, settings, embedder, model_error, priority)

    @property
    def knowledge(self) -> KnowledgeBase:
        """The per-mode knowledge bases, kept beside the code index (a full rebuild of the
        code index leaves them alone)."""
        if self._knowledge is None:
            try:
                manifest = IndexManifest.read(self.index_dir) if self.embedder is None else None
            except IndexCorruptError:  # the code index's damage; the knowledge table has its own
                manifest = None  # checks, and reading it needs no width
            dimension = (self.embedder.dimension if self.embedder
                         else manifest.dimension if manifest else 0)
            self._knowledge = KnowledgeBase(
                self.index_dir, self.root, self.embedder.embed if self.embedder else None,
                dimension)
        return self._knowledge

    @property
    def token_counter(self) -> ModelTokenCounter | None:
        """The model's tokenizer as a counter (``None`` without the model)."""
        return self._counter

    @property
    def degraded(self) -> bool:
        """True when the model could not be loaded (see :attr:`model_error`)."""
        return self.embedder is None

    @property
    def rebuilding_beside(self) -> bool:
        """True while a full rebuild is made beside the live index: searches meanwhile
        answer from the whole current index, not from what is indexed so far."""
        return self._rebuilding_beside.is_set()

    def _require_model(self) -> OnnxEmbedder:
        if self.embedder is None:
            raise self.model_error or RagLspError("the embedding model is not loaded")
        return self.embedder

    # ---- index -------------------------------------------------------------------------

    def has_index(self) -> bool:
        """True when an index in this rag-lsp's format exists (an older one is rebuilt by
        the next :meth:`index`)."""
        manifest = IndexManifest.read(self.index_dir)
        return manifest is not None and manifest.schema_version == SCHEMA_VERSION

    def outdated_index(self) -> int | None:
        """The format version of an index written by an older rag-lsp, else ``None``."""
        manifest = IndexManifest.read(self.index_dir)
        if manifest is not None and manifest.schema_version != SCHEMA_VERSION:
            return manifest.schema_version
        return None

    def _chunking(self) -> dict:
        """The settings that decide chunk boundaries; recorded in the manifest."""
        return {
            "chunker": CHUNKER_VERSION,
            "chunkTokens": self.settings.chunk_tokens,
            "chunkOverlapTokens": self.settings.chunk_overlap_tokens,
            "chunkHeaders": self.settings.chunk_headers,
            "secretFilter": self.settings.secret_filter,
        }

    def _open_store(self, *, for_writing: bool = False, full: bool = False) -> ChunkStore:
        """The index's store. Only indexing creates an index (``for_writing``); ``full``
        drops it first. Reading an index that does not exist raises, with the fix."""
        return self._index.store(for_writing=for_writing, full=full, chunking=self._chunking())

    @contextmanager
    def _writing(self, progress: ProgressCallback | None = None) -> Iterator[None]:
        """Hold the index's writer lock for one write; while another process holds it, wait
        (saying for whom, through ``progress`` and the log) unless this workspace closes."""
        told: list[str] = []

        def on_wait(owner: LockOwner | None) -> None:
            if self._closed.is_set():
                raise WorkspaceClosedError(f"the workspace {self.root} was closed")
            who = owner.describe() if owner else "another process"
            message = f"waiting for {who} to finish writing the index"
            if not told:
                log.info("%s: %s", self.root, message)
                told.append(message)
            if progress is not None:
                progress(IndexProgress("wait", message=message))

        if not self.root.is_dir():  # taking the lock would make the folder again
            raise RagLspError(f"the workspace folder {self.root} no longer exists; nothing "
                              "was written. Open the folder where it is now.")
        self._writer.acquire(on_wait=on_wait)
        try:
            self._index.settle()  # what an interrupted rebuild left
            yield
        finally:
            self._writer.release()
            after_work()

    def warm_up(self) -> None:
        """Load what a first search would wait for: the query session, and (in the
        background) the index's in-memory copy. Until that copy is in, searches ask LanceDB,
        ~90 ms each at 12k chunks against ~15. Optional work: it never raises (a search
        reports the same fault, with its fix)."""
        try:
            if self.embedder is not None:
                self.embedder.warm_up()
            if self.has_index():
                self._read(lambda store: store.vectors_in_memory())
        except RagLspError as exc:
            log.debug("%s: warm-up: %s", self.root, exc)
        except Exception:  # never the end of the thread that does it
            log.warning("%s: warm-up failed", self.root, exc_info=True)

    def close(self) -> None:
        """Stop waiting to write (a write under way finishes its batch); the object stays
        usable for reads."""
        self._closed.set()

    def _indexer(self, store: ChunkStore, rechunk: bool = False, *,
                 beside: bool = False) -> Indexer:
        """``beside``: the run builds a new index while the current one answers searches (no
        draft: the current index has every file)."""
        embedder = self._require_model()
        return Indexer(
            self.root,
            self.settings,
            store,
            lambda texts, checkpoint, embedded: embedder.embed(
                texts, before_batch=lambda: (checkpoint(), self.priority.wait_turn()),
                on_batch=embedded),
            self._counter,
            self.index_dir,
            rechunk=rechunk,
            shared_cache=self._shared_cache(),
            draft=None if beside else self._draft,
            pause=self.priority.wait_turn,
            around_rewrite=self._bulk_session_set_aside,
        )

    def _bulk_session_set_aside(self) -> AbstractContextManager[object]:
        """Around the steps of a compaction that rewrite every row (the ANN index trained
        again and the compaction after it): the model's bulk session, idle between batches, is
        let go and started again after (see ``OnnxEmbedder.bulk_session_set_aside``;
        bench/README.md, "The bulk session set aside while the ANN index is trained")."""
        if self.embedder is None:
            return nullcontext()
        return self.embedder.bulk_session_set_aside()

    def _shared_cache(self) -> EmbeddingCache | None:
        """The user's cache of computed vectors, if on (and the weights' hash is known: a
        vector is reused only under the very same weights)."""
        embedder = self.embedder
        if embedder is None or not self.settings.embedding_cache or not embedder.model_sha256:
            return None
        try:
            folder = user_cache_dir()
        except RuntimeError as exc:  # no home folder to put it in: go without
            log.warning("no shared embedding cache: %s", exc)
            return None
        return open_shared(folder, embedder.model_id, embedder.model_sha256,
                           embedder.tokenizer_sha256, embedder.dimension,
                           self.settings.embedding_cache_megabytes << 20)

    def index(self, *, full: bool = False, progress: ProgressCallback | None = None) -> IndexReport:
        """Bring the index up to date; ``full`` rebuilds it from scratch.

        A full rebuild of an index that answers searches is made beside it, and swapped in
        when complete: until then searches (of every process) use the current index, and an
        interrupted rebuild leaves it as it was. An index that cannot answer (damaged, of an
        older format or another model) is dropped and rebuilt in place, so searches see the
        new one grow. A damaged index is rebuilt by itself (it is derived from the
        workspace), and the report says why. The knowledge bases beside the index are never
        touched."""
        self._require_model()
        with self._index_lock, self._writing(progress):
            try:
                return self._index_locked(full, progress)
            except IndexCorruptError as exc:
                if full:
                    raise
                why = without_rebuild_hint(str(exc))  # the rebuild is under way
                log.warning("%s; rebuilding it from the workspace", why)
                report = self._index_locked(True, progress)
                report.rebuilt_because = why
                return report

    def _index_locked(self, full: bool, progress: ProgressCallback | None) -> IndexReport:
        if full and self._index.answers_searches():
            return self._rebuild_beside(progress)
        store = self._open_store(for_writing=True, full=full)
        # Damage found now is rebuilt; found later it fails searches. Reading every recorded
        # file also finds what LanceDB would read as data (bench/integrity_cost.py: the cost).
        store.check_readable()
        store.verify(full=True)
        store.record_digests()  # files of an older rag-lsp: trusted on first sight
        manifest = IndexManifest.read(self.index_dir)
        # Changed chunk settings: every file is re-chunked (unchanged chunks keep vectors).
        rechunk = manifest is not None and manifest.chunking != self._chunking()
        report = self._indexer(store, rechunk).run(progress)
        self._stamp(chunking=self._chunking())
        return report

    def _rebuild_beside(self, progress: ProgressCallback | None) -> IndexReport:
        embedder = self._require_model()
        staging = fresh_staging(self.index_dir)
        manifest = self._index.new_manifest(self._chunking())
        self._rebuilding_beside.set()
        try:
            manifest.write(staging)
            store = ChunkStore(staging, embedder.dimension, create=True)
            report = self._indexer(store, beside=True).run(_with_note(progress, REBUILD_NOTE))
            manifest.last_indexed_at = _now()
            manifest.write(staging)
            if progress is not None:
                progress(IndexProgress("finish", message="switching to the rebuilt index"))
            self._index.swap_in()  # no search of this process runs while the tables move
        except BaseException:
            if not swap_under_way(self.index_dir):  # (a swap cut short is finished later)
                discard(self.index_dir)
            raise
        finally:
            self._rebuilding_beside.clear()
        log.info("%s: switched to the rebuilt index", self.root)
        return report

    def update(self, rel_paths: list[str]) -> IndexReport:
        """Re-index just these paths (workspace-relative or absolute): created, changed or
        deleted files, or deleted folders. Drafts of them (:meth:`draft_saved`) from before
        it reads them go when it ends, also if it fails: the index is the truth then."""
        read_from = self._draft.mark() if self._draft is not None else 0
        try:
            self._require_model()
            with self._index_lock, self._writing():
                report = self._indexer(
                    self._open_store(for_writing=True)).update_paths(rel_paths)
                if report.files_indexed or report.files_removed:
                    self._stamp()
                return report
        finally:
            if self._draft:
                rules = self.event_filter()
                self._draft.discard((r for r in map(rules.relative, rel_paths) if r),
                                    drafted_before=read_from)

    def drafts_saved_files(self) -> bool:
        """Whether :meth:`draft_saved` drafts anything (not without ``lexicalFirst``)."""
        return self._draft is not None

    def draft_saved(self, rel_paths: list[str]) -> list[str]:
        """Make these changed paths searchable by their words now, as they are on disk, ahead
        of their :meth:`update` (which may wait behind another write: a compaction that trains
        the ANN index again takes tens of seconds at 100k chunks); a deleted one is no longer
        found. Of a burst of more than ``DRAFT_SAVED_MAX_FILES`` (a branch switch) only the
        deleted files and folders, and nothing without ``lexicalFirst``. The paths drafted
        (workspace-relative)."""
        if self._draft is None:
            return []
        return draft_saved(self._draft, self.event_filter(), rel_paths, self.priority.wait_turn,
                           self._stored_chunks)

    def _stored_chunks(self, rel_paths: list[str]) -> dict[str, list[dict]]:
        """These files' chunks in the index (what a draft of them keeps: see
        ``DraftIndex.add``), by path; none without an index, or when it cannot be read now."""
        if not self.has_index():
            return {}
        return read_stored(lambda: self._read(
            lambda store: store.chunks_of(rel_paths, STORED_COLUMNS)))

    def compact(self, *, force: bool = False) -> CompactionTimes | None:
        """Compact the tables and fold rows written by :meth:`update` into the indexes, if
        that is due (see ``ChunkStore.needs_optimize``) or ``force``; worth asking once a
        burst of updates has settled. Compaction due or not, the in-memory copy the updates
        patched is then made compact if they left enough to matter (see
        ``ChunkStore.settle_copy``); nothing is done while another writer holds the index.
        How long the compaction took (the lock and settling the copy included, as the
        server's log has always given it), ``None`` if none ran."""
        started = time.monotonic()
        self._require_model()
        with self._index_lock:
            if not self.root.is_dir():  # gone: the lock would make the folder again
                return None
            try:
                self._writer.acquire(wait=False)
            except IndexBusyError:
                return None  # the process writing now compacts after its own run if due
            try:
                self._index.settle()
                store = self._open_store(for_writing=True)
                store.ensure_fts_index()
                times = (store.optimize(self._bulk_session_set_aside)
                         if force or store.needs_optimize() else None)
                store.settle_copy()  # the saves' patches no longer cost each search
                if times is None:
                    return None
                return replace(times, seconds=time.monotonic() - started)
            finally:
                self._writer.release()
                after_work()

    def event_filter(self) -> WorkspaceFilter:
        """The scan's rules, for deciding cheaply which file events can matter."""
        return WorkspaceFilter(self.root, self.settings, index_dir=self.index_dir)

    def _stamp(self, chunking: dict | None = None) -> None:
        manifest = IndexManifest.read(self.index_dir)
        if manifest is not None:
            manifest.last_indexed_at = _now()
            if chunking is not None:
                manifest.chunking = chunking
            manifest.write(self.index_dir)

    # ---- search ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        threshold: float | None = None,
        mode: str | None = None,
        filters: SearchFilters | None = None,
    ) -> SearchResponse:
        """Files relevant to ``query``, best first, each scoring at least ``threshold`` (the
        setting by default; see :mod:`rag_lsp.search.ranking` for what the score means)."""
        started = time.perf_counter()
        if top_k is not None and top_k < 1:
            raise BadInputError(f"top_k must be at least 1 (got {top_k})")
        mode, warnings = self._search_mode(query, mode)
        filters = normalised(filters or SearchFilters(), self.root)
        attempts: list[SearchTimings] = []  # a read may run again on a new build

        def read(store: ChunkStore) -> list[SearchResult]:
            attempts.append(SearchTimings())
            return search_files(
                self._search_index(store),
                query,
                mode=mode,
                top_k=self.settings.top_k if top_k is None else top_k,
                threshold=self.settings.threshold if threshold is None else threshold,
                filters=filters,
                answer_threshold=self.settings.answer_threshold,
                timings=attempts[-1],
            )

        with self.priority.searching():
            results = self._read(read)
        if not results and (filters.paths or filters.languages):
            unmatched = nothing_matches(filters, self._read(lambda s: list(s.file_records())),
                                        self.root)
            warnings += [unmatched] if unmatched else []
        took_ms = (time.perf_counter() - started) * 1000
        return SearchResponse(query, mode, took_ms, results, warnings, attempts[-1])

    def find_chunks(
        self,
        query: str,
        *,
        limit: int,
        threshold: float | None = None,
        mode: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[ChunkHit]:
        """Chunks (not files) relevant to ``query``, best first: the raw material for packing
        context. Same modes, threshold and filters as :meth:`search`."""
        mode, _warnings = self._search_mode(query, mode)
        filters = normalised(filters or SearchFilters(), self.root)
        with self.priority.searching():
            return self._read(lambda store: search_chunks(
                self._search_index(store),
                query,
                mode=mode,
                limit=limit,
                threshold=self.settings.threshold if threshold is None else threshold,
                filters=filters,
                answer_threshold=self.settings.answer_threshold,
            ))

    def _read(self, read: Callable[[ChunkStore], T]) -> T:
        """``read(store)`` on the current build (see :meth:`LiveIndex.read`)."""
        try:
            return self._index.read(read)
        finally:
            after_work()  # what the read allocated goes back once the process is quiet

    def _search_index(self, store: ChunkStore) -> SearchIndex:
        if store is not self._background_of:  # another build: calibrate on it afresh
            self._background, self._background_of = BackgroundCache(), store
        return SearchIndex(
            store,
            self.embedder.embed_query if self.embedder else None,
            self._background,
            RankingWeights.from_settings(self.settings),
            self._draft,
        )

    def definition_span(self, path: str, symbol: str) -> tuple[int, int] | None:
        """First and last line of every chunk of ``symbol`` in ``path`` (an oversized
        definition is indexed in pieces; this is the whole of it). In a drafted file (saved,
        its update not landed), where its pieces are now; ``None`` if one of them changed."""
        rows = self.definition_pieces(path, symbol)
        if not rows:
            return None
        return min(r["start_line"] for r in rows), max(r["end_line"] for r in rows)

    def definition_pieces(self, path: str, symbol: str) -> list[dict]:
        """Every chunk of ``symbol`` in ``path``: its lines (in a drafted file, where they are
        now) and indexed ``text``; none if one of them is gone from a drafted file."""
        if not symbol:
            return []
        rows = self._read(lambda store: store.chunk_rows(
            all_of(f"path = {quote(path)}", f"symbol = {quote(symbol)}"),
            ["id", "path", "start_line", "end_line", "text"],
        ))
        view = self._draft.view() if self._draft else None
        if view is not None and path in view.paths:
            moved = [view.moved_row(row) for row in rows]
            rows = [] if None in moved else moved
        return rows

    def _search_mode(self, query: str, mode: str | None) -> tuple[str, list[str]]:
        """The mode to use (lexical without a model) and any warning to pass on."""
        mode = mode or self.settings.search_mode
        if mode not in MODES:
            raise BadInputError(f"search mode {mode!r} is not one of {', '.join(MODES)}")
        if not query.strip():
            raise BadInputError("the search query is empty; pass some words to look for")
        if self.embedder is None and mode != "lexical":
            return "lexical", [f"semantic search is unavailable, showing lexical results "
                               f"only: {self.model_error}"]
        return mode, []

    # ---- status ------------------------------------------------------------------------

    def status(self) -> WorkspaceStatus:
        problem = None
        try:
            manifest = IndexManifest.read(self.index_dir)
        except IndexCorruptError as exc:  # the status is how a user looks into it: say it
            manifest, problem = None, str(exc)
        files = chunks = 0
        if manifest is not None:
            files, chunks = self._read(lambda store: (store.count_files(), store.count_chunks()))
        model = self.embedder or manifest
        return WorkspaceStatus(
            root=str(self.root),
            index_dir=str(self.index_dir),
            indexed=manifest is not None,
            files=files,
            chunks=chunks,
            model_id=model.model_id if model else "",
            model_sha256=model.model_sha256 if model else "",
            dimension=model.dimension if model else 0,
            last_indexed_at=manifest.last_indexed_at if manifest else None,
            degraded_reason=str(self.model_error) if self.embedder is None else None,
            embedding_cache=str(cache.path) if (cache := self._shared_cache()) else None,
            drafted_files=self.drafted_files(),
            index_problem=problem,
        )

    def drafted_files(self) -> int:
        """New files searchable by their words only, while this process's run embeds them
        (not saved files drafted ahead of their update)."""
        return self._draft.new_files() if self._draft is not None else 0
