"""Which build of an index folder this process uses, and how it follows rebuilds.

An index is rebuilt now and then, by this process or another: dropped and made again in
place, or made beside the live one and swapped in (see :mod:`rag_lsp.store.staging`).
A reader notices a new build by the manifest's ``created_at``, or by the chunks folder no
longer being the one it opened, and reopens the tables. Whatever drops, creates or swaps
tables, and every read, holds :attr:`LiveIndex.tables_lock`, so a query of this process never
runs over files being deleted. The writer lock (one writer per index, across processes) is
kept here too.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol, TypeVar

from rag_lsp.errors import IndexBusyError, IndexCorruptError, IndexMissingError, RagLspError
from rag_lsp.store.integrity import INTEGRITY_NAME
from rag_lsp.store.lance_store import ChunkStore
from rag_lsp.store.manifest import MANIFEST_NAME, SCHEMA_VERSION, IndexManifest
from rag_lsp.store.staging import TABLE_DIRS, settle, swap_in, swap_under_way
from rag_lsp.store.writer_lock import WriterLock

log = logging.getLogger(__name__)
T = TypeVar("T")

# A reader that meets another process moving a rebuilt index into place (a few renames)
# waits this long for it to finish, instead of failing the search.
SWAP_WAIT_SECONDS = 2.0


class ModelInfo(Protocol):
    """What an index records of the model that wrote it (the embedder has these too)."""

    model_id: str
    model_sha256: str
    dimension: int


def build_stamp() -> str:
    # A manifest's created_at tells readers the index was rebuilt; two rebuilds within one
    # second must differ.
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class LiveIndex:
    """The index folder of one workspace as this process sees it.

    ``model`` is the embedding model in use (``None`` when it could not be loaded, and
    ``model_error`` says why: then an existing index is still read, with the vector width
    its manifest gives, but none is created).
    """

    def __init__(self, index_dir: Path, root: Path, model: ModelInfo | None,
                 model_error: RagLspError | None = None):
        self.index_dir = index_dir
        self._root = root
        self._model = model
        self._model_error = model_error
        # Re-entrant: a read may reopen the tables it reads.
        self.tables_lock = threading.RLock()
        self.writer = WriterLock(index_dir)
        self._store: ChunkStore | None = None
        self._created_at = ""  # which build of the index _store is

    def require_model(self) -> ModelInfo:
        if self._model is None:
            raise self._model_error or RagLspError("the embedding model is not loaded")
        return self._model

    def new_manifest(self, chunking: dict) -> IndexManifest:
        """The manifest of a build about to be made with the current model."""
        model = self.require_model()
        return IndexManifest(SCHEMA_VERSION, model.model_id, model.model_sha256,
                             model.dimension, build_stamp(), chunking=chunking)

    # ---- opening -----------------------------------------------------------------------

    def store(self, *, for_writing: bool = False, full: bool = False,
              chunking: dict | None = None) -> ChunkStore:
        """The tables of the current build. Only a writer (``for_writing``) creates an
        index, with ``chunking`` in its manifest; ``full`` drops the index first. Reading
        an index that does not exist raises, with the fix."""
        with self.tables_lock:
            return self._store_locked(for_writing, full, chunking or {})

    def _store_locked(self, for_writing: bool, full: bool, chunking: dict) -> ChunkStore:
        if full:
            self.require_model()
            self.drop()  # even when the old manifest is unreadable
            manifest = None
        else:
            manifest = IndexManifest.read(self.index_dir)
            if (for_writing and manifest is not None
                    and manifest.schema_version != SCHEMA_VERSION):
                # Chunking or embedded text changed: every chunk must be made again, once.
                self.require_model()
                log.info("index at %s has format %s, this rag-lsp writes %s: rebuilding it",
                         self.index_dir, manifest.schema_version, SCHEMA_VERSION)
                self.drop()
                manifest = None
        if manifest is None:
            self.require_model()  # without a model, that is the problem to fix
            if not for_writing:
                raise IndexMissingError(
                    f"there is no index at {self.index_dir} yet. Run `rag-lsp index {self._root}`."
                )
            self.drop()  # tables left without a manifest are not trusted
            manifest = self.new_manifest(chunking)
            manifest.write(self.index_dir)
            self._store = ChunkStore(self.index_dir, manifest.dimension, create=True)
            self._created_at = manifest.created_at
            return self._store
        if self._model is not None:
            manifest.check_compatible(self.index_dir, self._model.model_id,
                                      self._model.model_sha256, self._model.dimension)
        if self._store is not None and (manifest.created_at != self._created_at
                                        or self._store.moved()):
            self.forget()  # another process rebuilt the index since we opened it
        if self._store is None:
            # Without the model (lexical search only) the vector width comes from the manifest.
            store = ChunkStore(self.index_dir, manifest.dimension, create=False)
            # A file changed since it was written would give wrong answers, not errors: it
            # is damage before anything is read (cheap: only files whose mtime moved are read).
            store.verify(full=False)
            self._store, self._created_at = store, manifest.created_at
        elif for_writing:
            self._store.sync()
        return self._store

    def forget(self) -> None:
        """Drop the open tables: the next use opens the current build."""
        self._store = None

    def drop(self) -> None:
        """Delete the index (not the knowledge bases beside it)."""
        self.forget()
        # The manifest goes first: a reader in another process then sees "no index yet" or
        # "being rebuilt", never a manifest whose tables are half deleted.
        (self.index_dir / MANIFEST_NAME).unlink(missing_ok=True)
        (self.index_dir / INTEGRITY_NAME).unlink(missing_ok=True)
        for name in TABLE_DIRS:
            shutil.rmtree(self.index_dir / name, ignore_errors=True)

    def answers_searches(self) -> bool:
        """True when the current build can be searched, and answers what was written (a
        full rebuild is then worth making beside it)."""
        try:
            with self.tables_lock:
                store = self.store()
                store.check_readable()
            store.verify(full=True)  # reads files, not tables: searches need not wait
        except RagLspError:
            return False
        return True

    # ---- rebuilds made beside the index ------------------------------------------------

    def settle(self) -> None:
        """Whatever an interrupted rebuild left (this process's or another's): a swap cut
        short is finished, an unfinished build removed. The caller holds the writer lock."""
        if swap_under_way(self.index_dir):
            with self.tables_lock:  # the tables move: no read of this process meanwhile
                settle(self.index_dir)
                self.forget()
        else:
            settle(self.index_dir)  # an unfinished build: nothing reads it

    def swap_in(self) -> None:
        """Move the completed build from the staging folder into place."""
        with self.tables_lock:
            self.forget()
            swap_in(self.index_dir)

    # ---- reading -----------------------------------------------------------------------

    def read(self, read: Callable[[ChunkStore], T]) -> T:
        """``read(store)``, while other processes may be writing the index. If one rebuilt
        it under us, read the new build; if one is rebuilding it now, say so (retryable)
        instead of calling the index damaged."""
        with self.tables_lock:
            try:
                return self._read_one_version(read)
            except (IndexCorruptError, IndexMissingError) as exc:
                failure: RagLspError = exc
            if self._rebuilt_meanwhile():
                try:
                    return self._read_one_version(read)  # reopened on the new build
                except (IndexCorruptError, IndexMissingError) as exc:
                    failure = exc
            owner = self.writer.holder_elsewhere()
            if owner is not None:
                raise IndexBusyError(
                    f"the index at {self.index_dir} is being rebuilt by "
                    f"{owner.describe()}; try again when it has finished") from failure
            raise failure

    def _read_one_version(self, read: Callable[[ChunkStore], T]) -> T:
        store = self.store()
        with store.one_version():
            return read(store)

    def _rebuilt_meanwhile(self) -> bool:
        """True when the index was replaced since it was opened. While another process
        moves a rebuilt index into place, wait for it to finish."""
        deadline = time.monotonic() + SWAP_WAIT_SECONDS
        while True:
            manifest = IndexManifest.read(self.index_dir)
            if manifest is not None and manifest.created_at != self._created_at:
                return True
            if not swap_under_way(self.index_dir) or time.monotonic() > deadline:
                return self._store is not None and self._store.moved()
            time.sleep(0.02)
