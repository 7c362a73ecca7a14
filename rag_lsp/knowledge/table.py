"""The ``knowledge`` LanceDB table: every mode's entries, with their vectors.

It lives in the index folder next to the code index's ``chunks`` and ``files`` tables; a
full code rebuild drops only those two, so knowledge survives it.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import lancedb
import pyarrow as pa

from rag_lsp.errors import IndexBusyError, IndexCorruptError, IndexMismatchError
from rag_lsp.knowledge.entries import KnowledgeEntry, anchors_to_json
from rag_lsp.store.failures import transient_failure
from rag_lsp.store.integrity import FileDigests
from rag_lsp.store.lance_caches import connect, index_cache_bytes, new_session
from rag_lsp.store.private import index_folder
from rag_lsp.store.sql import in_list

log = logging.getLogger(__name__)

KNOWLEDGE = "knowledge"
# The digests of the table's files (see rag_lsp.store.integrity), apart from the code
# index's: a code rebuild drops those, never these.
KNOWLEDGE_INTEGRITY = "knowledge.integrity.json"
# Columns read back into entries (everything but the vector).
COLUMNS = [
    "id", "mode", "title", "content", "tags", "session_id", "created_at", "created_us",
    "anchors", "stale", "stale_reason",
]
_IN_BATCH = 500
# Each write is a table version with its own small file; fold them together now and then.
_COMPACT_EVERY = 100
_KEEP_OLD_VERSIONS = timedelta(seconds=60)
# Another process (an editor's server, an agent's `rag-lsp mcp`) may write the same table at
# the same moment; LanceDB then rejects one commit as a conflict, and it is simply retried.
_CONFLICT_ATTEMPTS = 6
_CONFLICT_BACKOFF_SECONDS = 0.05


def _retrying_conflicts(write: Callable[[], object]) -> object:
    """``write()``, again after a short random pause when a concurrent commit beat it (the
    rejected commit changed nothing, so retrying is safe)."""
    for attempt in range(_CONFLICT_ATTEMPTS):
        try:
            return write()
        except (OSError, RuntimeError) as exc:
            conflict = isinstance(transient_failure(exc, "the knowledge base"), IndexBusyError)
            if not conflict or attempt == _CONFLICT_ATTEMPTS - 1:
                raise
            time.sleep(_CONFLICT_BACKOFF_SECONDS * (attempt + 1) * (0.5 + random.random()))
    raise AssertionError("unreachable")


# How long a table another process is creating may stay listed but not openable.
BORN_WAIT_SECONDS = 2.0


def knowledge_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string()),
            pa.field("mode", pa.string()),
            pa.field("title", pa.string()),
            pa.field("content", pa.string()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("session_id", pa.string()),
            pa.field("created_at", pa.string()),  # UTC ISO 8601, as shown
            pa.field("created_us", pa.int64()),  # the same time, for filtering and sorting
            pa.field("anchors", pa.string()),  # JSON list, see Anchor.to_json
            pa.field("stale", pa.bool_()),
            pa.field("stale_reason", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def _reports_damage(method: Callable) -> Callable:
    """LanceDB's low-level failures become :class:`IndexCorruptError` saying what to do."""

    @functools.wraps(method)
    def wrapper(self: KnowledgeTable, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (OSError, RuntimeError) as exc:
            transient = transient_failure(exc, f"the knowledge base in {self.index_dir}")
            raise (transient or self.damage(exc)) from exc

    return wrapper


class KnowledgeTable:
    """The table of one index folder, opened (or created) on first use.

    Writes are serialised by a lock; reads see other writers' commits (other processes
    too) on the next call.
    """

    def __init__(self, index_dir: Path, dimension: int):
        self.index_dir = index_dir
        self.dimension = dimension
        self.lock = threading.RLock()
        self._db: lancedb.DBConnection | None = None
        self._table: lancedb.table.Table | None = None
        self._writes = 0
        self._digests = FileDigests(index_dir, (KNOWLEDGE + ".lance",), KNOWLEDGE_INTEGRITY)

    def damage(self, exc: Exception | str) -> IndexCorruptError:
        detail = exc if isinstance(exc, str) else (str(exc) or type(exc).__name__).splitlines()[0]
        return IndexCorruptError(
            f"the knowledge base at {self.index_dir / (KNOWLEDGE + '.lance')} is damaged "
            f"({detail}). A code rebuild does not repair it: restore it from a backup, or move "
            "it aside to start an empty knowledge base."
        )

    def exists(self) -> bool:
        return self._open(create=False) is not None

    def _open(self, *, create: bool) -> lancedb.table.Table | None:
        """The table; ``None`` when nobody has added an entry yet (and not ``create``)."""
        with self.lock:
            if self._table is not None:
                return self._table
            if not create and not self.index_dir.is_dir():
                return None  # connecting would create the folder
            try:
                if self._db is None:
                    index_folder(self.index_dir)
                    # Interval 0: every read sees other writers' (e.g. the CLI's) commits;
                    # caches bounded as the chunks' are (entries are few, versions many).
                    self._db = connect(self.index_dir, new_session(index_cache_bytes(0)))
                if KNOWLEDGE in self._db.list_tables().tables:
                    self._table = self._checked(self._open_listed())
                elif create:
                    self._table = self._db.create_table(
                        KNOWLEDGE, schema=knowledge_schema(self.dimension), exist_ok=True
                    )
            except (OSError, ValueError, RuntimeError) as exc:
                transient = transient_failure(exc, f"the knowledge base in {self.index_dir}")
                raise (transient or self.damage(exc)) from exc
            return self._table

    def _open_listed(self) -> lancedb.table.Table:
        """The listed table. Another process creating it makes its folder (listed) before
        its first version (openable): for a moment it is "not found", which is not damage."""
        assert self._db is not None
        deadline = time.monotonic() + BORN_WAIT_SECONDS
        while True:
            try:
                return self._db.open_table(KNOWLEDGE)
            except ValueError as exc:
                if "was not found" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _checked(self, table: lancedb.table.Table) -> lancedb.table.Table:
        """``table``, once every recorded file is found as it was written. A file that
        changed would be read as entries that are not the ones stored: that is damage,
        reported (every call says so, with the fix) but never repaired by deleting, since
        entries cannot be made again. The table is small: reading it all costs little."""
        damage = self._digests.damage(full=True)
        if damage is not None:
            raise self.damage(damage)
        self._digests.record()  # files of an older rag-lsp are trusted on first sight
        return table

    def check_dimension(self) -> None:
        """Vectors from another model's width cannot be compared: say so and how to go on."""
        table = self._open(create=False)
        stored = table.schema.field("vector").type.list_size if table is not None else None
        if stored is not None and stored != self.dimension:
            raise IndexMismatchError(
                f"the knowledge base at {self.index_dir} holds {stored}-dimensional vectors; "
                f"this model makes {self.dimension}. Use the model that wrote it (entries can "
                "still be listed, deleted and cleared)."
            )

    # ---- reads ---------------------------------------------------------------------------

    @_reports_damage
    def rows(self, where: str | None, columns: list[str]) -> list[dict]:
        table = self._open(create=False)
        if table is None:
            return []
        query = table.search()
        if where:
            query = query.where(where)
        return query.select(columns).limit(None).to_list()

    def rows_for_ids(self, ids: list[str], columns: list[str] = COLUMNS) -> list[dict]:
        rows: list[dict] = []
        for start in range(0, len(ids), _IN_BATCH):
            rows += self.rows(in_list("id", ids[start : start + _IN_BATCH]), columns)
        return rows

    @_reports_damage
    def count(self, where: str) -> int:
        table = self._open(create=False)
        return 0 if table is None else table.count_rows(where)

    @_reports_damage
    def nearest(
        self, vector: list[float], where: str | None, top_k: int, threshold: float
    ) -> list[KnowledgeEntry]:
        """Every entry with cosine >= ``threshold`` that could rank in the top ``top_k``:
        the nearest ones, plus any further ones tying with the k-th to two decimals."""
        table = self._open(create=False)
        if table is None:
            return []
        limit = top_k + 10
        while True:
            query = table.search(vector, vector_column_name="vector").distance_type("cosine")
            if where:
                query = query.where(where, prefilter=True)
            rows = query.select([*COLUMNS, "_distance"]).limit(limit).to_list()
            found = [KnowledgeEntry.from_row(r) for r in rows]
            entries = [e for e in found if (e.score or 0.0) >= threshold]
            if len(rows) < limit or len(entries) < len(rows):
                return entries  # all of them, or all above the threshold
            entries.sort(key=lambda e: -(e.score or 0.0))
            if round(entries[-1].score or 0.0, 2) < round(entries[top_k - 1].score or 0.0, 2):
                return entries
            limit *= 4

    # ---- writes --------------------------------------------------------------------------

    @_reports_damage
    def insert(self, row: dict) -> None:
        with self.lock:
            table = self._open(create=True)
            self.check_dimension()
            data = pa.Table.from_pylist([row], schema=table.schema)
            _retrying_conflicts(lambda: table.add(data))
            self._wrote(table)

    @_reports_damage
    def delete(self, where: str) -> int:
        with self.lock:
            table = self._open(create=False)
            # Deleting nothing would still write a table version.
            if table is None or table.count_rows(where) == 0:
                return 0
            removed = _retrying_conflicts(lambda: table.delete(where)).num_deleted_rows
            self._wrote(table)
            return removed

    @_reports_damage
    def save_checks(self, entries: list[KnowledgeEntry]) -> None:
        """Store these entries' anchors and stale state (nothing else changes)."""
        by_id = {e.id: e for e in entries}
        with self.lock:
            table = self._open(create=False)
            rows = self.rows_for_ids(list(by_id), [*COLUMNS, "vector"])
            if table is None or not rows:
                return
            for row in rows:
                entry = by_id[row["id"]]
                row["anchors"] = anchors_to_json(entry.anchors)
                row["stale"] = entry.stale
                row["stale_reason"] = entry.stale_reason
            data = pa.Table.from_pylist(rows, schema=table.schema)
            # Update only: an entry deleted meanwhile stays deleted.
            _retrying_conflicts(
                lambda: table.merge_insert("id").when_matched_update_all().execute(data))
            self._wrote(table)

    def _wrote(self, table: lancedb.table.Table) -> None:
        """After a committed write: compact now and then. A compaction that loses a race with
        another process's write is skipped (the next one folds the files in); it must never
        turn the committed write into a reported failure, or the caller would add it twice."""
        self._writes += 1
        if self._writes % _COMPACT_EVERY == 0:
            try:
                table.optimize(cleanup_older_than=_KEEP_OLD_VERSIONS)
            except (OSError, RuntimeError) as exc:
                log.info("knowledge base compaction skipped: %s", str(exc).splitlines()[0])
        self._digests.record()

    @_reports_damage
    def optimize(self) -> None:
        """Compact the small per-write files and drop versions older than a minute."""
        with self.lock:
            table = self._open(create=False)
            if table is not None:
                table.optimize(cleanup_older_than=_KEEP_OLD_VERSIONS)
                self._digests.record()
