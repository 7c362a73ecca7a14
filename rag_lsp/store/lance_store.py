"""LanceDB tables for one workspace index: ``chunks`` (text + vectors) and ``files``.

All writes for an index go through one :class:`ChunkStore` (one writer); readers may use
the same object from other threads, LanceDB gives them consistent snapshots.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS

from rag_lsp.errors import IndexCorruptError
from rag_lsp.store.manifest import REBUILD_HINT
from rag_lsp.store.sql import in_list

log = logging.getLogger(__name__)

CHUNKS, FILES = "chunks", "files"
# Rows per IN (...) list: keeps filter strings to a sane size.
_IN_BATCH = 500
# Readers may still be on an older version while we compact; give them time to finish.
_KEEP_OLD_VERSIONS = timedelta(seconds=60)


# What a search hands back per chunk: not the vector (4 × 384 bytes) or the full-text copy,
# which only cost time to read (bench: vector search p95 25 -> 19 ms at 11k chunks).
RESULT_COLUMNS = ["id", "path", "start_line", "end_line", "language", "kind", "symbol", "text"]


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
            pa.field("content_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
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
            detail = (str(exc) or type(exc).__name__).splitlines()[0]
            raise IndexCorruptError(
                f"the index at {self.index_dir} is damaged ({detail}). {REBUILD_HINT}"
            ) from exc

    return wrapper


def _batches(values: Sequence[str], size: int = _IN_BATCH) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class ChunkStore:
    """The chunks and files tables of one index folder."""

    def __init__(self, index_dir: Path, dim: int, *, create: bool = False):
        """Open the tables, or with ``create`` make them; a missing table of an existing
        index is damage, not a reason to start empty (the files table would then claim
        files are indexed whose chunks are gone)."""
        self.index_dir = index_dir
        self.dim = dim
        self._write_lock = threading.Lock()
        try:
            index_dir.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(index_dir))
            names = set(self._db.list_tables().tables)
            if create:
                self._chunks = self._db.create_table(CHUNKS, schema=chunk_schema(dim))
                self._files = self._db.create_table(FILES, schema=FILE_SCHEMA)
            elif {CHUNKS, FILES} <= names:
                self._chunks = self._db.open_table(CHUNKS)
                self._files = self._db.open_table(FILES)
            else:
                missing = ", ".join(sorted({CHUNKS, FILES} - names))
                raise IndexCorruptError(
                    f"the index at {index_dir} is damaged (table {missing} is missing). "
                    + REBUILD_HINT
                )
            self._fts_ready = self._has_fts_index()
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexCorruptError(
                f"the index at {index_dir} cannot be opened ({exc}). {REBUILD_HINT}"
            ) from exc

    def _has_fts_index(self) -> bool:
        return any(i.index_type == "FTS" for i in self._chunks.list_indices())

    # ---- reads -------------------------------------------------------------------------

    @_reports_damage
    def file_records(self) -> dict[str, FileRecord]:
        table = self._files.to_arrow()
        return {row["path"]: FileRecord(**row) for row in table.to_pylist()}

    @_reports_damage
    def count_chunks(self) -> int:
        return self._chunks.count_rows()

    @_reports_damage
    def count_files(self) -> int:
        return self._files.count_rows()

    @_reports_damage
    def vectors_for_hashes(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors for any of these content hashes (from any file)."""
        found: dict[str, np.ndarray] = {}
        unique = sorted(set(hashes))
        for batch in _batches(unique):
            rows = (
                self._chunks.search()
                .where(in_list("content_hash", batch))
                .select(["content_hash", "vector"])
                .limit(None)
                .to_arrow()
            )
            hashes_col = rows.column("content_hash").to_pylist()
            for h, v in zip(hashes_col, rows.column("vector").to_pylist(), strict=True):
                found.setdefault(h, np.asarray(v, dtype=np.float32))
        return found

    @_reports_damage
    def vector_search(
        self, vector: np.ndarray, limit: int, where: str | None = None
    ) -> list[dict]:
        query = (self._chunks.search(vector, vector_column_name="vector").metric("cosine")
                 .select([*RESULT_COLUMNS, "_distance"]))
        if where:
            query = query.where(where, prefilter=True)
        rows = query.limit(limit).to_list()
        for row in rows:
            row["cosine"] = 1.0 - float(row.pop("_distance"))
        return rows

    @_reports_damage
    def text_search(self, text: str, limit: int, where: str | None = None) -> list[dict]:
        # Another writer (thread or process) may have built the index since we opened.
        if not self._fts_ready:
            self._fts_ready = self._has_fts_index()
            if not self._fts_ready:
                return []
        # With the vector: lexical-only hits get a real cosine in hybrid search.
        query = (self._chunks.search(text, query_type="fts", fts_columns="search_text")
                 .select([*RESULT_COLUMNS, "vector", "_score"]))
        if where:
            query = query.where(where, prefilter=True)
        return query.limit(limit).to_list()

    @_reports_damage
    def chunk_rows(self, where: str, columns: list[str]) -> list[dict]:
        return self._chunks.search().where(where).select(columns).limit(None).to_list()

    # ---- writes ------------------------------------------------------------------------

    @_reports_damage
    def replace_files(self, records: Sequence[FileRecord], chunk_rows: list[dict]) -> None:
        """Swap in new chunks and file records for ``records``' paths, in one batch."""
        with self._write_lock:
            paths = [r.path for r in records]
            for batch in _batches(paths):
                self._chunks.delete(in_list("path", batch))
            if chunk_rows:
                self._chunks.add(pa.Table.from_pylist(chunk_rows, schema=self._chunks.schema))
            self._upsert_files(records)

    @_reports_damage
    def touch_files(self, records: Sequence[FileRecord]) -> None:
        """Record new size/mtime for files whose content did not change."""
        with self._write_lock:
            self._upsert_files(records)

    @_reports_damage
    def remove_files(self, paths: Sequence[str]) -> None:
        with self._write_lock:
            for batch in _batches(list(paths)):
                self._chunks.delete(in_list("path", batch))
                self._files.delete(in_list("path", batch))

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
    def ensure_fts_index(self) -> None:
        """Build the full-text index once; later rows are folded in by :meth:`optimize`."""
        with self._write_lock:
            if self._fts_ready or self._chunks.count_rows() == 0:
                return
            self._chunks.create_index(
                "search_text", config=FTS(stem=True, remove_stop_words=True), replace=True
            )
            self._fts_ready = True

    @_reports_damage
    def optimize(self) -> None:
        """Compact files, fold new rows into indexes and drop old versions (after bursts)."""
        with self._write_lock:
            for table in (self._chunks, self._files):
                table.optimize(cleanup_older_than=_KEEP_OLD_VERSIONS)
