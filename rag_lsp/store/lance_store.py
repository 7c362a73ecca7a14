"""LanceDB tables for one workspace index: ``chunks`` (text + vectors) and ``files``.

One process writes an index at a time (the caller holds its
:class:`~rag_lsp.store.writer_lock.WriterLock`); within it, writes are serialised here.
Readers — other threads, other processes — get consistent snapshots, and every read sees the
latest commit, whoever made it, as of the read's start (see :meth:`ChunkStore.one_version`),
except while a writer replaces files' chunks: then the version before (see
:mod:`rag_lsp.store.replacing`).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from lancedb.index import FTS

from rag_lsp.errors import IndexCorruptError, RagLspError
from rag_lsp.memory import return_freed_memory
from rag_lsp.store.compaction_times import CompactionTimes
from rag_lsp.store.failures import transient_failure
from rag_lsp.store.integrity import FileDigests
from rag_lsp.store.lance_caches import (
    connect,
    index_cache_bytes,
    new_session,
    outgrown,
    worth_letting_go,
)
from rag_lsp.store.lance_queries import nearest_rows, text_rows
from rag_lsp.store.manifest import REBUILD_HINT
from rag_lsp.store.packed_fields import PACKED_COLUMN, PACKED_FIELDS, PACKING_SQL, pack, unpack
from rag_lsp.store.private import private_dir
from rag_lsp.store.replacing import Replacing, read_marker, visible_version, write_marker
from rag_lsp.store.retraining import Outcome, compact_in_child, retrain_in_child
from rag_lsp.store.sql import all_of, in_list
from rag_lsp.store.vector_cache import VectorCache, VectorMatrix, while_process_runs
from rag_lsp.store.vector_index import (
    MATRIX_MAX_ROWS,
    answers_alone,
    approximate,
    build_vector_index,
    compacts_in_a_child,
    index_segments,
    needs_training,
    of_an_older_kind,
    trained_rows,
    trains_in_a_child,
)
from rag_lsp.store.version_watch import VersionWatch
from rag_lsp.terms import query_terms

log = logging.getLogger(__name__)

CHUNKS, FILES = "chunks", "files"
# Rows per IN (...) list: keeps filter strings to a sane size.
_IN_BATCH = 500
# A write of this many chunks or more (an index run's batch: indexer.WRITE_BATCH_CHUNKS, 512;
# a save writes one file's, tens) hands freed memory back before each of its steps that
# allocates much (the merge, the deletion, the in-memory copy's patch; the lookup of stored
# chunks before it): what one step freed stays resident in glibc's heaps, and the next step's
# own memory goes on top of it. Near 47.5k chunks a re-index peaked at 390-398 MB in the
# server with these against 403-412 without (bench/README.md, "Freed memory handed back
# between a batch's steps"). A hand-back takes 1-4 ms; a save's write does without, and the
# process hands back once quiet (rag_lsp.memory.after_work). Only while the in-memory copy is
# held (up to MATRIX_MAX_ROWS chunks): past it the compaction sets the peak either way, and at
# 100k chunks searches during a re-index were slower with them in two pairs of runs (p95
# 53.0 / 64.7 against 48.7 / 51.1 ms, server alone) for 2-9 MB less.
BULK_WRITE_ROWS = 256
# Readers may still be on an older version while we compact; give them time to finish.
_KEEP_OLD_VERSIONS = timedelta(seconds=60)
# When a compaction is due (see ChunkStore.needs_optimize): past this many fragments (one
# per write) in either table; with more than this share of the stored chunks masked out
# (the share past which LanceDB rewrites a fragment, here of the whole table); or past this
# many versions that its cleanup would delete.
MAX_FRAGMENTS = 8
DELETED_MAX_SHARE = 0.1
MAX_OLD_VERSIONS = 32
# Rows outside the full-text index that may wait for a compaction: LanceDB's full-text search
# reads them at every query (+78 ms for 1,400 rows in 7 fragments at 100k chunks,
# bench/README.md, "compaction when due").
# Up to POSTINGS_MAX_ROWS a process's searches answer from its postings in memory, and only
# a search before they load (a one-shot `rag-lsp search`) pays; past it every search does.
MAX_UNINDEXED_ROWS = 512
# After a child's retraining or compaction was killed by a signal (the system out of memory,
# likely) or ended past its deadline, a run that compacts every few batches would start one
# again each time: no child for that work before this long (the table is searched as it is
# meanwhile, in more fragments, its ANN index in more segments or trained on fewer rows).
CHILD_AFTER_KILLED_SECONDS = 600.0


# What a search hands back per chunk: not the vector (4 × 384 bytes) or the full-text copy,
# which only cost time to read (bench: vector search p95 25 -> 19 ms at 11k chunks).
RESULT_COLUMNS = ["id", "path", "start_line", "end_line", "language", "kind", "symbol", "text",
                  "defines", "terms"]
# Read with the vectors into memory, up to POSTINGS_MAX_ROWS chunks: all a search ranks by. The
# text (most of a row's bytes) too, up to TEXT_IN_MEMORY_BYTES in all; past that it is read
# for the chunks a search returns (fill_text), ~2 ms a read whatever the rows.
ROW_COLUMNS = [c for c in RESULT_COLUMNS if c != "text"]
# Of those, what the in-memory copy keeps: each row's ``terms`` go into the postings, which
# tell a search which of its words a row has (VectorMatrix.rows_at); the column itself was
# a third of the copy's columns (14 of 39 MB at 47.5k chunks).
KEPT_COLUMNS = [c for c in ROW_COLUMNS if c != "terms"]
# What a search reads from LanceDB for RESULT_COLUMNS where the table has the packed fields
# (see packed_fields): three columns instead of ten. The row id (not stored: LanceDB's own)
# finds the few rows the packed value cannot give, in their columns.
PACKED_RESULT_COLUMNS = ("text", PACKED_COLUMN, "_rowid")
# Chunks of code average ~0.4 KB of text (this repository: 423 bytes, at most 1.2 KB), so
# 24 MB holds the text of ~50k chunks, where the matrix stops; generated or prose-heavy
# workspaces with longer chunks keep reading it.
TEXT_IN_MEMORY_BYTES = 24 * 1024 * 1024
# Vector lookups with which the writer fills LanceDB's new caches after a compaction (each
# reads the partitions nearest a random direction: see ChunkStore._warm_caches)
WARM_UP_PROBES = 4
# Rows read to describe an index as a whole (see rag_lsp.search.calibration).
SAMPLE_COLUMNS = ["vector", "terms"]
# Rows read at a time into the in-memory vector matrix and postings: with the words, 8,192
# held ~25 MB more at the peak of a 12k-chunk load than 2,048.
VECTOR_LOAD_BATCH_ROWS = 2048
# Rows the in-memory copy's load asks LanceDB for in one scan. A scan decodes ahead of its
# reader, and the load reads slower than LanceDB decodes: at 47.5k chunks one scan of every
# row, nothing kept, peaked 97 MB above the process, scans of 8,192 rows one after the other
# 50 MB (bench/README.md, "The copy's load in pages").
LOAD_PAGE_ROWS = 8192
# Chunks up to which full-text lookups are answered from memory: the postings load with the
# vector matrix, which is not loaded past MATRIX_MAX_ROWS anyway.
POSTINGS_MAX_ROWS = MATRIX_MAX_ROWS


def chunk_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string()),
            pa.field("path", pa.string()),
            pa.field("start_line", pa.int32()),
            pa.field("end_line", pa.int32()),
            pa.field("language", pa.string()),
            pa.field("kind", pa.string()),
            pa.field("symbol", pa.string()),
            pa.field("text", pa.string()),
            # text + heading/signature context + split identifiers, for the full-text index
            pa.field("search_text", pa.string()),
            # names the chunk defines, space-separated (see rag_lsp.chunking.definitions)
            pa.field("defines", pa.string()),
            # its distinct stemmed terms, space-separated (see rag_lsp.terms), for ranking
            pa.field("terms", pa.string()),
            pa.field("content_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            # id, path, lines, language, kind, symbol, defines and terms in one string,
            # which reads back faster than they do (see rag_lsp.store.packed_fields)
            pa.field(PACKED_COLUMN, pa.string()),
        ]
    )


FILE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("mtime_ns", pa.int64()),
        pa.field("sha256", pa.string()),
        pa.field("chunks", pa.int32()),
    ]
)


@dataclass(frozen=True)
class StoredChunk:
    """What a content hash already has in the index."""

    vector: np.ndarray
    terms: str
    defines: str


@dataclass(frozen=True)
class FileRecord:
    path: str
    size: int
    mtime_ns: int
    sha256: str
    chunks: int


def _reports_damage(method: Callable) -> Callable:
    """Turn LanceDB's low-level failures (missing or unreadable data files) into
    :class:`IndexCorruptError` carrying the fix, instead of a traceback."""

    @functools.wraps(method)
    def wrapper(self: ChunkStore, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (OSError, RuntimeError) as exc:
            transient = transient_failure(exc, f"the index at {self.index_dir}")
            if transient is not None:
                raise transient from exc
            detail = (str(exc) or type(exc).__name__).splitlines()[0]
            raise IndexCorruptError(
                f"the index at {self.index_dir} is damaged ({detail}). {REBUILD_HINT}"
            ) from exc

    return wrapper


def _recorded(method: Callable) -> Callable:
    """A write: once it has committed, record the digests of the files it added."""

    @functools.wraps(method)
    def wrapper(self: ChunkStore, *args, **kwargs):
        result = method(self, *args, **kwargs)
        self._digests.record()
        return result

    return wrapper


def _with_row_ids(columns: Sequence[str]) -> list[str]:
    return [*columns] if "_rowid" in columns else [*columns, "_rowid"]


def _with_packed_fields(data: pa.Table, rows: Sequence[dict]) -> pa.Table:
    """``data`` (``rows`` as a table of the chunks' schema) with its rows' packed fields, if
    the schema has their column."""
    at = data.schema.get_field_index(PACKED_COLUMN)
    if at < 0:
        return data
    return data.set_column(at, data.schema.field(at), pa.array([pack(row) for row in rows],
                                                                type=pa.string()))


def _tables_missing(index_dir: Path, names: Sequence[str]) -> IndexCorruptError:
    return IndexCorruptError(f"the index at {index_dir} is damaged (table {', '.join(names)} "
                             f"is missing). {REBUILD_HINT}")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _manifests_before(versions_dir: Path, cutoff: float) -> int:
    """Versions (a manifest file each) last written before ``cutoff`` (a ``time.time()``)."""
    try:
        with os.scandir(versions_dir) as listing:
            entries = list(listing)
    except FileNotFoundError:
        return 0
    found = 0
    for entry in entries:
        try:
            found += entry.name.endswith(".manifest") and entry.stat().st_mtime < cutoff
        except FileNotFoundError:  # cleaned up meanwhile by another process
            pass
    return found


def _batches(values: Sequence[str], size: int = _IN_BATCH) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _scanned_in_pages(table, columns: list[str], page_rows: int
                      ) -> Iterator[pa.RecordBatch]:  # table: lancedb.table.Table
    """Every row of ``table`` (a handle at one version) with ``columns`` and ``_rowid``, in
    batches of :data:`VECTOR_LOAD_BATCH_ROWS`, read by scans of ``page_rows`` rows one after
    the other: each scan decodes ahead of its reader only as far as its own end."""
    offset = 0
    while True:
        read = 0
        for batch in (table.search().select(columns).with_row_id(True).offset(offset)
                      .limit(page_rows).to_batches(VECTOR_LOAD_BATCH_ROWS)):
            read += batch.num_rows
            yield batch
        if read < page_rows:
            return
        offset += read


def _rows_in_memory(matrix: VectorMatrix, positions: np.ndarray, terms: Sequence[str] | None
                    ) -> list[dict] | None:
    """The rows at ``positions`` from the in-memory copy, or ``None`` (read them from
    LanceDB): none kept, or each row's own terms wanted (``terms`` not given) where the copy
    keeps only which of a search's words it has. So a caller that names no words gets whole
    rows, slower, never rows that silently lack their terms."""
    if terms is None and matrix.columns is not None and "terms" not in matrix.columns.column_names:
        return None
    return matrix.rows_at(positions, () if terms is None else terms)


class ChunkStore:
    """The chunks and files tables of one index folder."""

    def __init__(self, index_dir: Path, dim: int, *, create: bool = False):
        """Open the tables, or with ``create`` make them; a missing table of an existing
        index is damage, not a reason to start empty (the files table would then claim
        files are indexed whose chunks are gone)."""
        self.index_dir = index_dir
        self.dim = dim
        self._write_lock = threading.Lock()
        self._digests = FileDigests(index_dir, (f"{CHUNKS}.lance", f"{FILES}.lance"))
        try:
            private_dir(index_dir)
            # Bounded caches (see lance_caches), sized again below once the rows are known.
            self._cache_bytes = index_cache_bytes(0)
            self._session = new_session(self._cache_bytes)
            self._db = connect(index_dir, self._session)
            names = set(self._db.list_tables().tables)
            if create:
                self._chunks = self._db.create_table(CHUNKS, schema=chunk_schema(dim))
                self._files = self._db.create_table(FILES, schema=FILE_SCHEMA)
            elif {CHUNKS, FILES} <= names:
                self._chunks = self._db.open_table(CHUNKS)
                self._files = self._db.open_table(FILES)
            else:
                raise _tables_missing(index_dir, sorted({CHUNKS, FILES} - names))
            # Reads go through a second handle checked out at the version they see (see
            # _reading): the first follows the latest version, which writes need.
            self._view = self._db.open_table(CHUNKS)
            # (folder, version) the reads' handle is at: a rebuild swapped in can have the same
            # version number in another folder
            self._view_at: tuple | None = None
            self._view_packed = False  # whether the version there has PACKED_COLUMN
            self._view_folder = _identity(self._chunks_dir())
            self._view_lock = threading.Lock()
            # The latest version, asked of LanceDB only when a commit may have moved it
            self._latest = VersionWatch(self._chunks_dir(), lambda: self._chunks.version)
            self._fts_ready = self._has_fts_index()
            # monotonic times before which no retraining, and no compaction in a child, is
            # tried (one was killed: see _train_and_compact, _compact_first)
            self._train_not_before = 0.0
            self._compact_not_before = 0.0
            # The chunks version from which this process knows the full-text index is there
            # (0: any version a read can see); a read of an older one checks (text_search).
            self._fts_since = 0
            self._vectors = VectorCache(self._load_vectors)
            # ((folder, table version), rows, rows its ANN index was trained on): see _ann
            self._ann_state: tuple[tuple, int, int | None] | None = None
            self._folder = _identity(self._chunks_dir())
            # The chunks table's version for the reads under way (see one_version).
            self._reads = 0
            self._read_version: int | None = None
            self._read_version_lock = threading.Lock()
            self._fit_caches()
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexCorruptError(
                f"the index at {index_dir} cannot be opened ({exc}). {REBUILD_HINT}"
            ) from exc

    def _chunks_dir(self) -> Path:
        return self.index_dir / f"{CHUNKS}.lance"

    def cached_bytes(self) -> int:
        """What LanceDB holds in this store's caches now (at most its index cache, sized to
        the rows, and the metadata cache: see :mod:`rag_lsp.store.lance_caches`)."""
        return self._session.size_bytes

    def _fit_caches(self, *, stale: bool = False) -> bool:
        """Connect again, with empty LanceDB caches sized to the chunks table, never smaller
        than before (see :mod:`rag_lsp.store.lance_caches`), when the ones it has hold
        ``stale`` entries (the writer, after a compaction wrote new index files) or have
        become too small for the rows (the writer then too, a reader that meets a grown
        table, or the store being opened). The caller holds the write lock, or the store is
        being made. Reads under way finish on the handles they took, the next ones
        check the new handle out at their version. Whether it connected again."""
        rows = self._chunks.count_rows()
        if not (stale or outgrown(self._cache_bytes, rows)) or self.moved():
            return False
        cache_bytes = max(self._cache_bytes, index_cache_bytes(rows))
        session = new_session(cache_bytes)
        db = connect(self.index_dir, session)
        chunks, files, view = db.open_table(CHUNKS), db.open_table(FILES), db.open_table(CHUNKS)
        with self._view_lock:
            self._db, self._chunks, self._files, self._view = db, chunks, files, view
            self._view_at = None
            self._session, self._cache_bytes = session, cache_bytes
        return True

    def moved(self) -> bool:
        """True once the chunks table's folder is not the one this object opened: a rebuild
        was swapped in (see :mod:`rag_lsp.store.staging`), and these handles now lead to
        other tables whose versions and row ids mean nothing to this object."""
        return _identity(self._chunks_dir()) != self._folder

    def verify(self, *, full: bool) -> None:
        """Raise :class:`IndexCorruptError` naming a file that changed after it was
        written (see :mod:`rag_lsp.store.integrity`): garbage LanceDB would read as data.
        Without ``full`` only files whose size or mtime moved are read (milliseconds, for
        every open); ``full`` reads them all (the start of an indexing run)."""
        damage = self._digests.damage(full=full)
        if damage is not None:
            raise IndexCorruptError(f"the index at {self.index_dir} is damaged ({damage}). "
                                    + REBUILD_HINT)

    def record_digests(self) -> None:
        """Record the files not recorded yet (the caller holds the writer lock)."""
        self._digests.record()

    def _has_fts_index(self, table=None) -> bool:  # noqa: ANN001 - a lancedb Table
        table = self._chunks if table is None else table
        indexed = {tuple(i.columns) for i in table.list_indices() if i.index_type == "FTS"}
        return {("search_text",), ("defines",)} <= indexed

    # ---- reads -------------------------------------------------------------------------

    @contextmanager
    def one_version(self) -> Iterator[None]:
        """Within, a read sees the chunks table at one version: the one it had when the read
        first asked. A look at the version after a commit is a round trip through LanceDB's
        event loop (0.5-1 ms beside a search's other threads; else a stat, see
        :mod:`rag_lsp.store.version_watch`), and a search looked three or four times.
        The caller holds the tables lock (``LiveIndex.read``), so reads never overlap; the
        writer and the vectors' reload ask LanceDB themselves."""
        with self._read_version_lock:
            if not self._reads:  # a lookup that outlived the last read may have set one
                self._read_version = None
            self._reads += 1
        try:
            yield
        finally:
            with self._read_version_lock:
                self._reads -= 1
                if not self._reads:
                    self._read_version = None

    def _version_read(self) -> int:
        """The chunks table's version reads see, held for the rest of the read under way if
        any: the latest, or the one before a replace under way (see
        :mod:`rag_lsp.store.replacing`)."""
        if not self._reads:
            return self._visible_version()
        with self._read_version_lock:  # the full-text lookups ask from threads of their own
            if self._read_version is None:
                self._read_version = self._visible_version()
            return self._read_version

    def _visible_version(self) -> int:
        return visible_version(self._chunks_dir(), self._latest.latest)

    def _reading(self):  # -> lancedb.table.Table
        """The chunks table at the version reads see (see :meth:`_version_read`)."""
        return self._reading_at(self._version_read())

    def _reading_at(self, version: int):  # -> lancedb.table.Table
        """The reads' handle moved to ``version``, the one a read took."""
        return self._checked_out(version)[0]

    def _checked_out(self, version: int) -> tuple[Any, bool]:
        """:meth:`_reading_at`, and whether the version the handle is at has the packed
        fields (asked of the same checkout)."""
        with self._view_lock:
            folder = _identity(self._chunks_dir())  # before the checkout: a swap after it
            if self._view_at != (folder, version):  # makes the next read check out again
                try:
                    self._check_out(folder, version)
                except ValueError as exc:  # LanceDB: no such table, or no such version
                    if folder is not None and _identity(self._chunks_dir()) == folder:
                        raise
                    # The folder went aside: another process is moving a rebuilt index into
                    # place (LiveIndex.read waits for it, then reads the new build).
                    raise _tables_missing(self.index_dir, [CHUNKS]) from exc
            return self._view, self._view_packed

    def _check_out(self, folder: tuple[int, int] | None, version: int) -> None:
        """The reads' handle, on the chunks folder ``folder``, moved to ``version``."""
        if folder != self._view_folder:
            # a rebuild swapped in: a handle of its own (the same version number would find
            # the old folder's files)
            self._view = self._db.open_table(CHUNKS)
            self._view_folder = folder
        try:
            self._view.checkout(version)
        except ValueError:  # cleaned up since the read took it (a compaction after a long
            # idle): nothing of it is left to read, so the read goes on at the version it
            # would see now
            version = self._visible_version()
            with self._read_version_lock:
                if self._reads:
                    self._read_version = version
            self._view.checkout(version)
        # once per version read: an index written before the column has none until its
        # writer adds it (ensure_packed_column). Before the handle counts as checked out.
        self._view_packed = PACKED_COLUMN in self._view.schema.names
        self._view_at = (folder, version)

    def _reading_rows(self) -> tuple[Any, Sequence[str]]:
        """The reads' handle (see :meth:`_reading`) and the columns a search reads rows back
        with there: ``PACKED_RESULT_COLUMNS`` where that version has the packed fields, else
        ``RESULT_COLUMNS``. Rows read with them go through :meth:`_rows_read`, with the same
        handle (columns may be added to any list given)."""
        table, packed = self._checked_out(self._version_read())
        return table, PACKED_RESULT_COLUMNS if packed else RESULT_COLUMNS

    @staticmethod
    def _rows_read(table: Any, rows: list[dict], *, keep_row_ids: bool = False) -> list[dict]:
        """``rows``, read from ``table`` with the columns :meth:`_reading_rows` gave, with
        the fields of ``RESULT_COLUMNS``: from the packed column, and for the few rows it
        cannot give them (a field holding its separator, a null field, rows an older
        rag-lsp wrote since the column was added) from the columns themselves, by row id;
        their ``_rowid`` kept only if ``keep_row_ids``. A row the table no longer has by that
        id (none expected: the same handle, the same version) is left out, not handed on
        without its path."""
        if not rows or PACKED_COLUMN not in rows[0]:
            return rows
        unread = unpack(rows)
        if unread:
            wanted = list(dict.fromkeys(row["_rowid"] for row in unread))
            found = {row.pop("_rowid"): row for row in table.take_row_ids(wanted)
                     .select([*PACKED_FIELDS, "_rowid"]).to_list()}
            for row in unread:
                row.update(found.get(row["_rowid"], {}))
            if len(found) < len(wanted):
                log.warning("%d of the rows a search read were not found by their row id",
                            len(wanted) - len(found))
                rows = [row for row in rows if "path" in row]
        if not keep_row_ids:
            for row in rows:
                del row["_rowid"]
        return rows

    def _table_at(self, version: int):  # -> lancedb.table.Table
        """A handle of its own on the chunks table at ``version``, for a read that outlasts
        searches (the vectors' load, in a thread of its own) and so must not see the shared
        view moved to another version under it."""
        try:
            table = self._db.open_table(CHUNKS)
        except ValueError as exc:  # LanceDB: no such table (a swap under way, see _reading_at)
            raise _tables_missing(self.index_dir, [CHUNKS]) from exc
        table.checkout(version)
        return table

    @_reports_damage
    def file_records(self) -> dict[str, FileRecord]:
        table = self._files.to_arrow()
        return {row["path"]: FileRecord(**row) for row in table.to_pylist()}

    @_reports_damage
    def count_chunks(self) -> int:
        """Chunks in the latest version: a count, which for a moment may include the new
        rows of a replace under way beside the ones they replace."""
        return self._chunks.count_rows()

    @_reports_damage
    def count_files(self) -> int:
        return self._files.count_rows()

    @_reports_damage
    def check_readable(self) -> None:
        """Read every chunk's id and path: lost or truncated data files raise here (as
        damage), not in the middle of a search. Metadata alone would not notice."""
        self._reading().search().select(["id", "path"]).limit(None).to_arrow()

    @_reports_damage
    def stored_for_hashes(self, hashes: Sequence[str]) -> dict[str, StoredChunk]:
        """What is already stored for any of these content hashes (from any file): the
        vector and the derived columns, so unchanged chunks are neither embedded nor
        re-analysed."""
        found: dict[str, StoredChunk] = {}
        unique = sorted(set(hashes))
        self._between_bulk_steps(len(unique))
        for batch in _batches(unique):
            rows = (
                self._chunks.search()
                .where(in_list("content_hash", batch))
                .select(["content_hash", "vector", "terms", "defines"])
                .limit(None)
                .to_list()
            )
            for row in rows:
                found.setdefault(row["content_hash"], StoredChunk(
                    np.asarray(row["vector"], dtype=np.float32), row["terms"], row["defines"]))
        return found

    def _load_vectors(self) -> VectorMatrix | None:
        version = self._visible_version()
        if self._large(version):  # built since the load was asked for: nothing to hold
            return None
        table = self._table_at(version)
        rows = table.count_rows()
        # Full-text postings too, up to a size (see rag_lsp.store.term_index): building them
        # at 100k chunks held ~260 MB more for a moment and ~70 MB after, where LanceDB's own
        # lookups are already a small part of a search.
        # The ranking columns too (~5.6 MB at 12k chunks of generated Python).
        columns = ["vector", *ROW_COLUMNS, "text"] if rows <= POSTINGS_MAX_ROWS else ["vector"]
        reader = _scanned_in_pages(table, columns, LOAD_PAGE_ROWS)
        return VectorMatrix.from_batches(version, while_process_runs(reader), rows, self.dim,
                                         row_columns=KEPT_COLUMNS if len(columns) > 1 else (),
                                         text_bytes=TEXT_IN_MEMORY_BYTES,
                                         exact_folder=self.index_dir)

    def vectors_in_memory(self) -> VectorMatrix | None:
        """The vectors of the current version in memory, or ``None``: not loaded yet (a
        reload starts), or a large index, whose ANN index answers (see :meth:`large`). Its
        vectors are read inside ``VectorCache.consistent``: a compaction of this process's
        may move them within their array."""
        if self.moved():  # the matrix's row ids belong to the tables swapped out
            return None
        try:
            version = self._version_read()
            if self._large(version):
                self._vectors.drop()  # its memory goes back; LanceDB answers from now on
                return None
            return self._vectors.current(version)
        except (OSError, RuntimeError):
            return None

    @_reports_damage
    def large(self) -> bool:
        """Past MATRIX_MAX_ROWS chunks and with its ANN index: nothing is held in memory,
        LanceDB's indexes answer (see :mod:`rag_lsp.store.vector_index`)."""
        return self._large(self._chunks.version)

    def _large(self, version: int) -> bool:
        _key, rows, trained = self._ann(version)
        return answers_alone(rows, trained)

    def _ann(self, version: int) -> tuple[tuple, int, int | None]:
        """The table's rows at ``version`` and the rows its ANN index was trained on (None:
        no index); asked of LanceDB once per version of the folder's tables."""
        key = (_identity(self._chunks_dir()), version)  # a rebuild swapped in: other tables
        known = self._ann_state
        if known is None or known[0] != key:
            # the version a search reads (most calls) through the reads' handle, else its own
            table = (self._reading_at(version) if version == self._version_read()
                     else self._table_at(version))
            known = (key, table.count_rows(), trained_rows(table))
            self._ann_state = known
            self._fit_caches_if_outgrown(known[1])
        return known

    def _fit_caches_if_outgrown(self, rows: int) -> None:
        """Larger caches for a store that only reads (it never compacts) once the writer
        has grown the table past them; skipped while this process writes (the writer
        connects again after its compaction)."""
        if outgrown(self._cache_bytes, rows) and self._write_lock.acquire(blocking=False):
            try:  # (a rebuild being swapped in can take the tables away meanwhile)
                self._fit_caches_or_keep(stale=False, when="for the grown table")
            finally:
                self._write_lock.release()

    def _training_state(self) -> tuple[int, int | None, int, bool]:
        """Rows, rows the ANN index was trained on, its segments, and whether it is of an
        older kind (asked of LanceDB each time: only writers need it, not searches)."""
        _key, rows, trained = self._ann(self._chunks.version)
        if trained is None:
            return rows, None, 0, False
        return rows, trained, index_segments(self._chunks), of_an_older_kind(self._chunks)

    @_reports_damage
    def needs_vector_index(self, max_segments: int | None = None) -> bool:
        """Whether :meth:`optimize` would (re)build the ANN index (with ``max_segments``:
        see :func:`~rag_lsp.store.vector_index.needs_training`)."""
        return needs_training(*self._training_state(), max_segments=max_segments)

    @_reports_damage
    def needs_optimize(self) -> bool:
        """Whether :meth:`optimize` is worth its cost now. Each one rewrites the whole chunks
        table (LanceDB compacts every fragment below a million rows: +80 MB at 23.7k chunks,
        see bench/README.md), so the rows of a few edits wait in fragments of their own,
        read unindexed, until one is due:
        - the ANN index to (re)build;
        - more than MAX_FRAGMENTS fragments in either table (past MATRIX_MAX_ROWS a search
          reads its rows from LanceDB, and each fragment costs it: 100k chunks in 35
          fragments 20.2 ms a vector query (p50), compacted into 2, 13.7 ms; and each run
          reads the whole files table, which a rewrite with the same bytes changes alone);
        - more than MAX_UNINDEXED_ROWS rows outside the full-text index (any past
          POSTINGS_MAX_ROWS, where every lexical search reads LanceDB's index);
        - more than DELETED_MAX_SHARE of the stored chunks masked out (a file's old chunks
          stay on disk until a compaction);
        - more than MAX_OLD_VERSIONS versions older than the cleanup keeps (a file saved
          again and again leaves few of the others: its last rows' fragment is dropped whole,
          but every version's files stay on disk, and each digest record walks them)."""
        stats = self._chunks.stats()
        fragments = stats["fragment_stats"]["num_fragments"]
        # lengths count rows as stored, deleted ones included (the mean rounds down)
        stored = stats["fragment_stats"]["lengths"]["mean"] * fragments
        deleted = stored - stats["num_rows"]
        file_fragments = self._files.stats()["fragment_stats"]["num_fragments"]
        unindexed_max = MAX_UNINDEXED_ROWS if stats["num_rows"] <= POSTINGS_MAX_ROWS else 0
        return (max(fragments, file_fragments) > MAX_FRAGMENTS
                or deleted > DELETED_MAX_SHARE * stored
                or self._unindexed_rows() > unindexed_max
                or self._old_versions() > MAX_OLD_VERSIONS or self.needs_vector_index())

    @_reports_damage
    def searches_read_full_text_index(self) -> bool:
        """Whether every lexical search runs LanceDB's full-text query (past
        POSTINGS_MAX_ROWS chunks, where no postings are held in memory), and so reads each
        row outside its index (see MAX_UNINDEXED_ROWS)."""
        return self._chunks.count_rows() > POSTINGS_MAX_ROWS

    def _unindexed_rows(self) -> int:
        """Rows the full-text index of ``search_text`` does not cover yet (0 without one:
        :meth:`ensure_fts_index` builds it whole)."""
        for index in self._chunks.list_indices():
            if index.index_type == "FTS" and list(index.columns) == ["search_text"]:
                stats = self._chunks.index_stats(index.name)
                return stats.num_unindexed_rows if stats is not None else 0
        return 0

    def _old_versions(self) -> int:
        """Versions of either table that a compaction's cleanup would delete."""
        cutoff = time.time() - _KEEP_OLD_VERSIONS.total_seconds()
        return max(_manifests_before(self.index_dir / f"{name}.lance" / "_versions", cutoff)
                   for name in (CHUNKS, FILES))

    @_reports_damage
    def vector_search(
        self, vector: np.ndarray, limit: int, where: str | None = None, *,
        terms: Sequence[str] | None = None,
    ) -> list[dict]:
        """The ``limit`` chunks nearest ``vector``, with their ``cosine``, nearest first
        (rows found in memory have no ``text`` yet when it was over its memory budget: see
        :meth:`fill_text`). Given ``terms`` (a search's words), each row's ``terms`` are
        those of them it has, and rows can come from memory (see
        :meth:`VectorMatrix.rows_at`); without, they are all its stored terms, read from
        LanceDB."""
        nearest = None if where else self._vectors.consistent(
            lambda: self._nearest_in_memory(vector, limit, terms))
        if nearest is not None:
            cosines, in_memory, row_ids = nearest
            if in_memory is not None and not self.moved():  # else they are of the old tables
                for row, cosine in zip(in_memory, cosines, strict=True):
                    row["cosine"] = cosine
                return in_memory
            table, columns = self._reading_rows()
            found = self._rows_read(table, table.take_row_ids(row_ids)
                                    .select(_with_row_ids(columns)).to_list(), keep_row_ids=True)
            by_id = {row.pop("_rowid"): row for row in found}
            # Else the rows came from a build swapped in meanwhile, or some moved: the copy
            # searched may be the one from before this process's write (see
            # VectorCache.current) while the read is of the table after it.
            if not self.moved() and all(row_id in by_id for row_id in row_ids):
                return [{**by_id[row_id], "cosine": float(cosine)}
                        for row_id, cosine in zip(row_ids, cosines, strict=True)]
        # LanceDB uses any index there is
        indexed = self._ann(self._version_read())[2] is not None
        table, columns = self._reading_rows()
        rows = self._rows_read(table, nearest_rows(
            table, vector, columns=[*columns, "_distance"], limit=limit, where=where,
            tune=approximate if indexed else None))
        for row in rows:
            row["cosine"] = 1.0 - float(row.pop("_distance"))
        return rows

    def _nearest_in_memory(self, vector: np.ndarray, limit: int, terms: Sequence[str] | None
                           ) -> tuple[list[float], list[dict] | None, list[int]] | None:
        """From the in-memory copy, if there is one: the cosines of the ``limit`` rows
        nearest ``vector``, their kept columns (``None`` if none were kept) and row ids."""
        matrix = self.vectors_in_memory()
        if matrix is None:
            return None
        positions, cosines = matrix.nearest(vector, limit)
        return (cosines.tolist(), _rows_in_memory(matrix, positions, terms),
                matrix.row_ids[positions].tolist())

    @_reports_damage
    def text_search(self, text: str, limit: int, where: str | None = None, *,
                    column: str = "search_text", with_vectors: bool = True,
                    terms: Sequence[str] | None = None) -> list[dict]:
        """BM25 matches of ``text`` in ``column`` (``search_text`` or ``defines``). Without a
        filter, once the vectors are in memory, from the postings loaded with them (the
        stored ``terms`` and path words stand for ``search_text``); the rows' ``terms`` as
        :meth:`vector_search` gives them, for the same ``terms``."""
        # Another writer (thread or process) may have built the index since we opened.
        if not self._fts_ready:
            if not self._has_fts_index():
                return []
            # a version at or after the index's (asked after it), set before the flag: a
            # lookup thread that sees the index ready also sees since when
            self._fts_since = self._chunks.version
            self._fts_ready = True
        if self._version_read() < self._fts_since and not self._has_fts_index(self._reading()):
            return []  # this read's version came before the index was built
        return self._vectors.consistent(
            lambda: self._text_search_once(text, limit, where, column, with_vectors, terms))

    def _text_search_once(self, text: str, limit: int, where: str | None, column: str,
                          with_vectors: bool, terms: Sequence[str] | None) -> list[dict]:
        """:meth:`text_search`, its index known to be there."""
        matrix = self.vectors_in_memory()
        if matrix is not None and matrix.terms is not None and not where:
            rows = self._text_search_in_memory(matrix, text, limit, column, with_vectors,
                                               terms)
            if rows is not None:
                return rows
            matrix = self.vectors_in_memory()  # the table changed meanwhile
        # With the vector: lexical-only hits get a real cosine in hybrid search (from memory
        # when the vectors are loaded).
        matrix = matrix if with_vectors else None
        if matrix is not None and matrix.version != self._version_read():
            matrix = None  # the copy from before this process's write: rows may have moved
        table, columns = self._reading_rows()
        columns = [*columns, "_score"]
        if with_vectors and matrix is None:
            columns.append("vector")
        keep_row_ids = matrix is not None  # to find each row's vector in the copy
        rows = self._rows_read(table, text_rows(
            table, text, column=column, columns=columns, limit=limit, where=where,
            with_row_id=keep_row_ids), keep_row_ids=keep_row_ids)
        if matrix is not None:
            if self.moved():  # the rows came from a build swapped in meanwhile: not the matrix's
                return self.text_search(text, limit, where, column=column,
                                        with_vectors=with_vectors, terms=terms)
            for row in rows:
                row["vector"] = matrix.vector_of(int(row.pop("_rowid")))
        return rows

    def _text_search_in_memory(self, matrix: VectorMatrix, text: str, limit: int, column: str,
                               with_vectors: bool, wanted: Sequence[str] | None
                               ) -> list[dict] | None:
        """:meth:`text_search` from the postings loaded with the vectors (see
        :mod:`rag_lsp.store.term_index`): one LanceDB read for the hits' columns. ``None``
        when the table changed under it (the caller asks LanceDB)."""
        if column == "defines":
            index, terms = matrix.names, text.lower().split()
        else:
            index, terms = matrix.terms, query_terms(text)
        assert index is not None
        positions, scores = index.search(terms, limit)
        row_ids = [int(r) for r in matrix.row_ids[positions]]
        if not row_ids:  # unless these postings are of tables swapped out meanwhile
            return None if self.moved() else []
        rows = _rows_in_memory(matrix, positions, wanted)
        if rows is not None and self.moved():  # of the tables swapped out meanwhile
            return None
        vectors = matrix.exact_vectors(positions) if with_vectors else None
        if rows is None:
            table, columns = self._reading_rows()
            found = self._rows_read(table, table.take_row_ids(row_ids)
                                    .select(_with_row_ids(columns)).to_list(), keep_row_ids=True)
            by_id = {row.pop("_rowid"): row for row in found}
            if len(by_id) < len(row_ids) or self.moved():  # rows went or a rebuild came
                return None
            rows = [by_id[row_id] for row_id in row_ids]
        for i, (row, score) in enumerate(zip(rows, scores.tolist(), strict=True)):
            row["_score"] = score
            if vectors is not None:
                row["vector"] = vectors[i]
        return rows

    @_reports_damage
    def fill_text(self, rows: Iterable[dict]) -> None:
        """Give rows found in memory (see :meth:`VectorMatrix.rows_at`) their ``text``: one
        read by row id; by chunk id for rows a compaction or a rebuild has moved since the
        memory copy was loaded. A chunk deleted meanwhile gets an empty text."""
        missing = [row for row in rows if "text" not in row]
        if not missing:
            return
        row_ids = list(dict.fromkeys(row["_rowid"] for row in missing))
        found = self._reading().take_row_ids(row_ids).select(["id", "text", "_rowid"]).to_list()
        by_row_id = {row["_rowid"]: row for row in found}
        if self.moved() or any(by_row_id.get(row["_rowid"], {}).get("id") != row["id"]
                               for row in missing):
            ids = list(dict.fromkeys(row["id"] for row in missing))
            texts = {row["id"]: row["text"]
                     for row in self.chunk_rows(in_list("id", ids), ["id", "text"])}
        else:
            texts = {row["id"]: row["text"] for row in found}
        for row in missing:
            row["text"] = texts.get(row["id"], "")

    @_reports_damage
    def sample_rows(self, count: int) -> tuple[list[dict], bool]:
        """About ``count`` chunks (vector and terms only), chosen by their content hash: the
        same chunks give the same sample whatever order writes and compactions left the rows
        in, so scores calibrated on it do not shift when the table is rewritten. And whether
        they are every chunk of the index (it holds no more than ``count``): a sample by
        hash holds more or fewer than ``count``, as chance has it."""
        total = self._reading().count_rows()
        if total == 0:
            return [], True
        if total <= count:
            return self.chunk_rows("true", SAMPLE_COLUMNS), True
        # hashes are uniform: those below a cutoff are a fair sample of count/total
        where = f"content_hash < '{int(0x10000 * count / total):04x}'"
        return self.chunk_rows(where, SAMPLE_COLUMNS), False

    @_reports_damage
    def version(self) -> int:
        """Changes whenever the chunks table does (another process's writes included);
        within a read, the version the read sees (see :meth:`one_version`)."""
        return self._version_read()

    @_reports_damage
    def chunk_rows(self, where: str, columns: list[str]) -> list[dict]:
        return self._reading().search().where(where).select(columns).limit(None).to_list()

    @_reports_damage
    def chunks_of(self, paths: Sequence[str], columns: list[str]) -> dict[str, list[dict]]:
        """The chunks of these files (``columns``, ``path`` among them), by path."""
        by_path: dict[str, list[dict]] = {}
        for batch in _batches(sorted(set(paths))):
            for row in self.chunk_rows(in_list("path", batch), columns):
                by_path.setdefault(row["path"], []).append(row)
        return by_path

    # ---- writes ------------------------------------------------------------------------

    @_reports_damage
    @_recorded
    def replace_files(self, records: Sequence[FileRecord], chunk_rows: list[dict],
                      removed: Sequence[str] = ()) -> None:
        """Swap in new chunks and file records for ``records``' paths, and drop ``removed``
        paths (a rename's old name, at most one ``in`` batch of them).

        The chunks of all these files change in one step as readers see it (never a file
        half-replaced, nor a renamed file under both names): two commits, the new rows (by
        id: unchanged ones rewritten in place), then the deletion of the rows no longer
        there, with readers kept on the version before until both are in (see
        :mod:`rag_lsp.store.replacing`). The file records follow, so a crash before them
        leaves records that do not match the files on disk, and the next run redoes them.
        """
        if not records:
            return
        if len(removed) > _IN_BATCH:
            raise ValueError(f"at most {_IN_BATCH} paths can be removed with a replace")
        changed = [r.path for r in records] + list(removed)
        rows = len(chunk_rows)
        with self._write_lock:
            self._settle_replace()
            paths = in_list("path", changed)
            data = _with_packed_fields(pa.Table.from_pylist(chunk_rows, schema=self._chunks.schema),
                                       chunk_rows)
            if not removed and self._chunks.count_rows(paths) == 0:
                # New files (a first index): an append is one commit, and cheap.
                if chunk_rows:
                    with self._writing_chunks_of(changed, rows):
                        self._between_bulk_steps(rows)
                        self._chunks.add(data)
                self._upsert_files(records)
                return
            # Not one merge_insert that also deletes them (when_not_matched_by_source_delete):
            # its join reads the whole table, +157 MB and 271 ms at 100k rows against +0 MB and
            # 109 ms for these two commits (bench/replace_cost.py, 2026-11-28).
            kept = in_list("id", [row["id"] for row in chunk_rows])  # "false" if none
            with (self._writing_chunks_of(changed, rows),
                  self._replacing(2 if chunk_rows else 1)):
                if chunk_rows:
                    self._between_bulk_steps(rows)
                    (
                        self._chunks.merge_insert("id")
                        .when_matched_update_all()
                        .when_not_matched_insert_all()
                        .execute(data)
                    )
                self._between_bulk_steps(rows)
                self._chunks.delete(all_of(paths, f"NOT ({kept})"))
            self._upsert_files(records)
            if removed:
                self._files.delete(in_list("path", list(removed)))

    @_reports_damage
    @_recorded
    def touch_files(self, records: Sequence[FileRecord]) -> None:
        """Record new size/mtime for files whose content did not change."""
        with self._write_lock:
            self._upsert_files(records)

    @_reports_damage
    @_recorded
    def remove_files(self, paths: Sequence[str]) -> None:
        with self._write_lock:
            self._settle_replace()
            with self._writing_chunks_of(paths):
                for batch in _batches(list(paths)):
                    self._chunks.delete(in_list("path", batch))
                    self._files.delete(in_list("path", batch))

    @contextmanager
    def _replacing(self, commits: int) -> Iterator[None]:
        """Around a write of exactly ``commits`` commits to the chunks table (the caller
        holds the write lock): readers keep the version before until the last is in. If it
        fails between them, they stay there until the next write settles it (see
        _settle_replace)."""
        if commits < 2:  # one commit is one step already
            yield
            return
        marker = read_marker(self._chunks_dir())
        seq = (marker.seq if marker is not None else 0) + 1
        before = self._chunks.version
        write_marker(self._chunks_dir(), Replacing(seq, before, before + commits),
                     durable=True)
        yield
        write_marker(self._chunks_dir(), Replacing(seq))

    def _settle_replace(self) -> None:
        """Before a write (the caller holds the write lock): a replace cut short between its
        commits (here, or in a process that died) has kept readers on the version before it;
        restore that version, so that no later commit makes the half-replaced files visible.
        Their records were not written yet: the next run replaces them again."""
        marker = read_marker(self._chunks_dir())
        if marker is None or marker.before is None:
            return
        if marker.holds(self._chunks.version):
            log.warning("a replace of chunks was cut short between its commits: restoring "
                        "version %d of %s", marker.before, self._chunks_dir())
            try:
                self._chunks.restore(marker.before)
            except ValueError as exc:  # cleaned up: the files' records still say the old
                # content, so the next run replaces them again; until then they show twice
                log.warning("version %d is gone (%s): the next run mends those files",
                            marker.before, exc)
            finally:
                self._chunks.checkout_latest()  # restore checks out first: back to writing
        write_marker(self._chunks_dir(), Replacing(marker.seq))

    @contextmanager
    def _writing_chunks_of(self, paths: Sequence[str], rows: int = 0) -> Iterator[None]:
        """Around a write of this process (the caller holds the write lock) that changes
        the chunks of ``paths`` and no others, ``rows`` new ones: meanwhile searches keep the
        in-memory copy of the version before, and after it the copy gets these paths' new
        rows, instead of going stale until a reload of the whole table (see
        ``VectorCache.writing``)."""
        with self._own_write(lambda matrix: self._patched(matrix, paths), rows):
            yield

    @contextmanager
    def _moving_rows(self) -> Iterator[None]:
        """Around a compaction, an index build or a column added, of this process or of its
        retraining child (the caller holds the write lock): the chunks stay what they were,
        some at other row ids, so the in-memory copy only needs their new row ids (an index
        run compacts every few batches: each left searches asking LanceDB until a reload)."""
        with self._own_write(self._relabelled):
            yield

    @contextmanager
    def _own_write(self, patched: Callable[[VectorMatrix], VectorMatrix | None],
                   rows: int = 0) -> Iterator[None]:
        """Around a write of ``rows`` new rows: searches keep the copy of the version before
        it meanwhile, and ``patched`` makes the copy of the version after it (nothing if none
        is held)."""
        before = self._chunks.version
        with self._vectors.writing(before):
            yield
            if self._chunks.version != before and not self.moved():
                self._between_bulk_steps(rows)
                self._vectors.patch(before, patched)

    def _between_bulk_steps(self, rows: int) -> None:
        """Before a step of a write of ``rows`` chunks: hand freed memory back if it is a bulk
        write and the in-memory copy is held (see :data:`BULK_WRITE_ROWS`)."""
        if rows >= BULK_WRITE_ROWS and self._vectors.holds_copy():
            return_freed_memory()

    def _relabelled(self, matrix: VectorMatrix) -> VectorMatrix | None:
        placed = self._chunks.search().select(["id"]).with_row_id(True).limit(None).to_arrow()
        return matrix.relabelled(self._chunks.version, placed.column("id").combine_chunks(),
                                 placed.column("_rowid").to_numpy())

    def _patched(self, matrix: VectorMatrix, paths: Sequence[str]) -> VectorMatrix | None:
        """``matrix`` brought to the current version, whose rows differ from its version's
        only in those of ``paths``; ``None`` past the size a load keeps columns for."""
        if self._chunks.count_rows() > POSTINGS_MAX_ROWS:
            return None
        columns = ["vector", *ROW_COLUMNS, "text"]

        def changed_rows() -> Iterator[pa.RecordBatch]:
            for batch in _batches(sorted(set(paths))):
                yield from (self._chunks.search().where(in_list("path", batch))
                            .select(columns).with_row_id(True).limit(None)
                            .to_batches(VECTOR_LOAD_BATCH_ROWS))

        return matrix.patched(self._chunks.version, paths, while_process_runs(changed_rows()),
                              TEXT_IN_MEMORY_BYTES, in_place=True)

    def _upsert_files(self, records: Sequence[FileRecord]) -> None:
        if not records:
            return
        data = pa.Table.from_pylist([r.__dict__ for r in records], schema=FILE_SCHEMA)
        (
            self._files.merge_insert("path")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(data)
        )

    @_reports_damage
    def sync(self) -> None:
        """Move to the latest version of both tables (another process may have written)."""
        for table in (self._chunks, self._files):
            table.checkout_latest()
        ready = self._has_fts_index()
        if ready and not self._fts_ready:
            self._fts_since = self._chunks.version
        self._fts_ready = ready

    @_reports_damage
    @_recorded
    def ensure_fts_index(self) -> None:
        """Build the full-text index once; later rows are folded in by :meth:`optimize`."""
        with self._write_lock:
            self._settle_replace()
            if self._fts_ready or self._chunks.count_rows() == 0:
                return
            with self._moving_rows():  # an index moves no rows: the same row ids
                self._chunks.create_index(
                    "search_text", config=FTS(stem=True, remove_stop_words=True), replace=True
                )
                # Defined names are matched whole and case-insensitively: no stemming, no
                # stop words.
                self._chunks.create_index(
                    "defines", config=FTS(base_tokenizer="whitespace", stem=False,
                                          remove_stop_words=False, ascii_folding=False),
                    replace=True,
                )
            self._fts_since = self._chunks.version
            self._fts_ready = True

    @_recorded
    def ensure_packed_column(self) -> bool:
        """Give an index written before the packed fields existed their column (see
        :mod:`rag_lsp.store.packed_fields`): one commit that computes it for every row and
        moves none. Whether it did. It only makes searches faster, so a failure (a full
        disk) is logged and the index searched as it is, from the columns, until a later
        run tries again."""
        with self._write_lock:
            self._settle_replace()
            if PACKED_COLUMN in self._chunks.schema.names:
                return False
            try:
                with self._moving_rows():
                    self._chunks.add_columns({PACKED_COLUMN: PACKING_SQL})
            except (OSError, RuntimeError, ValueError) as exc:
                log.warning("could not add the packed fields' column to %s (searches read "
                            "the columns instead): %s", self.index_dir, exc)
                return False
            return True

    def settle_copy(self) -> bool:
        """Once this process's writes have settled (an index run's end, a burst of saves
        compacted): the in-memory copy its patches left made one compact copy, if they left
        enough to matter, so that searches until the next write score it as they score a
        fresh load (see ``VectorCache.settle``). Whether it was. The table does not change;
        a copy of an older version (another process wrote since) waits for its reload."""
        with self._write_lock:
            if self.moved():
                return False
            return self._vectors.settle(self._chunks.version, TEXT_IN_MEMORY_BYTES)

    @_reports_damage
    @_recorded
    def optimize(self, around_rewrite: Callable[[], AbstractContextManager[object]]
                 = nullcontext, *, max_segments: int | None = None) -> CompactionTimes:
        """Compact files, fold new rows into indexes and drop old versions (after bursts);
        then (re)build the ANN index when the table is past MATRIX_MAX_ROWS chunks and has
        none or has outgrown the rows it was trained on, or when edits have left it in too
        many segments (see rag_lsp.store.vector_index), and compact again: LanceDB does not merge
        fragments that different segments cover, so the first compaction goes only as far
        as the segments let it (training took 1.7 s on 100k chunks compacted, 15.5 s on the
        26 fragments, and their deleted rows, that 25 segments had kept apart).
        The training and that second compaction, which rewrites every row (the highest peak
        of memory at 100k chunks), run in a child process (:mod:`rag_lsp.store.retraining`),
        inside ``around_rewrite()``: the caller's chance to set other memory aside. The first
        compaction runs in a child too between two sizes (:meth:`_compact_first`), outside
        ``around_rewrite()``: it takes a second or two. Before
        the first compaction the store connects again, with empty caches, if the ones it has
        hold enough to matter (:meth:`_let_go_of_caches`); after, if the table changed: what
        LanceDB cached of the versions before is of no more use (see lance_caches).
        ``max_segments``: the most segments the ANN index may keep (by default
        MAX_SEGMENTS; one at the end of a run that folded batches: see
        ``Indexer._finish``). How long it took, and of that the training's part."""
        started = time.monotonic()
        training_seconds = None
        with self._write_lock:
            self._settle_replace()
            self._between_bulk_steps(BULK_WRITE_ROWS)  # the compaction's memory goes on top
            before = self._chunks.version
            emptied = self._let_go_of_caches()
            with self._moving_rows():
                self._compact_first()
                rows, trained, segments, older_kind = self._training_state()
                if needs_training(rows, trained, segments, older_kind, max_segments):
                    with around_rewrite():
                        training_started = time.monotonic()  # (the set-aside not counted)
                        if self._train_and_compact(rows):
                            training_seconds = time.monotonic() - training_started
            # (a failure after a committed compaction is not damage: the old handles stay)
            refitted = self._fit_caches_or_keep(stale=self._chunks.version != before,
                                                when="after a compaction")
        if refitted or emptied:
            self._warm_caches()
        return CompactionTimes(time.monotonic() - started, training_seconds)

    def _compact_first(self) -> None:
        """The compaction every :meth:`optimize` starts with: between two sizes in a child
        process (:func:`~rag_lsp.store.vector_index.compacts_in_a_child`), here if that one
        fails. One killed by a signal, or ended past its deadline, leaves the chunks table as
        far as it got (committed or not: a version it committed is relabelled as any), the
        files table, small, is compacted here, and for a while the chunks table is not
        compacted at all: a run optimizes every few batches, and at these sizes searches
        answer from the in-memory copy, whatever the fragments."""
        rows = self._chunks.count_rows()
        if compacts_in_a_child(rows):
            if time.monotonic() < self._compact_not_before:
                self._files.optimize(cleanup_older_than=_KEEP_OLD_VERSIONS)
                return
            outcome = compact_in_child(self.index_dir, rows, _KEEP_OLD_VERSIONS,
                                       self._caches_following_versions())
            if outcome in (Outcome.KILLED, Outcome.TIMED_OUT):
                self._compact_not_before = time.monotonic() + CHILD_AFTER_KILLED_SECONDS
            if outcome is not Outcome.FAILED:
                self._files.optimize(cleanup_older_than=_KEEP_OLD_VERSIONS)
                return
        self._compact()

    def _train_and_compact(self, rows: int) -> bool:
        """Train the ANN index on ``rows`` rows and compact after: past the size in a child
        process (see :mod:`rag_lsp.store.retraining`), here if that one fails (not the
        training again if it got that far) or is below the size. A child killed by a signal,
        or ended past its deadline, is not followed by the same work here, nor by another
        child for a while. Whether the index was trained."""
        if trains_in_a_child(rows):
            if time.monotonic() < self._train_not_before:
                return False
            outcome = retrain_in_child(self.index_dir, rows, _KEEP_OLD_VERSIONS,
                                       self._caches_following_versions())
            if outcome in (Outcome.KILLED, Outcome.TIMED_OUT):
                self._train_not_before = time.monotonic() + CHILD_AFTER_KILLED_SECONDS
            if outcome is not Outcome.FAILED:
                return outcome is Outcome.DONE
            if (trained_rows(self._chunks) == rows and index_segments(self._chunks) == 1
                    and not of_an_older_kind(self._chunks)):
                self._compact()
                return True
        build_vector_index(self._chunks, rows)
        self._compact()
        return True

    def _caches_following_versions(self) -> Callable[[], None]:
        """While another process writes (the retraining's child, under this one's write lock):
        connect again whenever it has committed a version. Searches meanwhile read the new
        version's index data (the new ANN index, the full-text indexes after its compaction)
        into the caches, where what they read of the one before would stay beside it until
        the end: at 100k chunks a searching process grew by 80-85 MB during the child's work
        without this, by 44-48 with it (bench/README.md, "The retraining in a child
        process"). Each time, searches read their index data again (from the page cache)."""
        seen = [self._chunks.version]

        def follow() -> None:
            if self._chunks.version != seen[0]:
                seen[0] = self._chunks.version
                self._fit_caches_or_keep(stale=True, when="after another process's commit")

        return follow

    def _let_go_of_caches(self) -> bool:
        """Before a compaction: connect again, with empty caches, when the ones this store has
        hold enough to matter (:func:`~rag_lsp.store.lance_caches.worth_letting_go`). What
        they hold is of the version the compaction replaces (the writer connects again after
        it anyway), and it would sit under the compaction's own memory at its peak: at 100k
        chunks 43-49 MB under +22-30 MB (bench/README.md, "LanceDB's caches let go of before
        a compaction"). Searches during the compaction read what they need again. Whether it
        did."""
        if not worth_letting_go(self.cached_bytes()):
            return False
        return self._fit_caches_or_keep(stale=True, when="before a compaction")

    def _fit_caches_or_keep(self, *, stale: bool, when: str) -> bool:
        """:meth:`_fit_caches`, with a failure to connect again logged and the old handles
        kept. Whether it connected again."""
        try:
            return self._fit_caches(stale=stale)
        except (OSError, RuntimeError, ValueError) as exc:
            log.warning("could not connect again to %s %s (%s): its caches stay as they are",
                        self.index_dir, when, exc)
            return False

    def _warm_caches(self) -> None:
        """A few vector lookups and one full-text lookup of each column, in the writer's
        thread and through a handle of its own (searches' shared handle and read version
        stay theirs), so that the next search finds the new caches partly filled: the
        full-text indexes' token maps and the ANN index's shared parts and some of its
        partitions. Only when LanceDB's indexes answer searches (a large index: see
        :meth:`large`). A failure is left for a search to meet and report."""
        try:
            table = self._table_at(self._chunks.version)
            trained = trained_rows(table)
            if not answers_alone(table.count_rows(), trained):
                return
            probes = np.random.default_rng(0).standard_normal((WARM_UP_PROBES, self.dim))
            for probe in probes.astype(np.float32):
                nearest_rows(table, probe / np.linalg.norm(probe), columns=["id", "_distance"],
                             limit=1, where=None, tune=approximate)
            if self._has_fts_index(table):
                for column in ("search_text", "defines"):
                    text_rows(table, "def", column=column, columns=["id", "_score"], limit=1,
                              where=None)
        except (RagLspError, OSError, RuntimeError, ValueError) as exc:
            log.debug("warming LanceDB's caches of %s failed: %s", self.index_dir, exc)

    def _compact(self) -> None:
        for table in (self._chunks, self._files):
            table.optimize(cleanup_older_than=_KEEP_OLD_VERSIONS)
