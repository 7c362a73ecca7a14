"""Vectors already computed, shared by every workspace of the user: a branch switch, a second
worktree or a fresh clone of the same repository embeds only chunks whose text is new.

One SQLite file per model (``<cache dir>/embeddings/<model>-<sha256 prefix>.sqlite3``), keyed
by the sha256 of the exact text the model saw, so a vector is only ever reused for the same
text under the same model weights. SQLite (standard library) because several processes —
language servers, ``rag-lsp mcp``, the CLI — read and write it at once: WAL mode lets readers
go on while one writes, and a busy timeout queues writers. Least recently used rows are
evicted past the size cap. Each row carries a CRC-32 of its key and vector: a damaged row is
a miss, never a wrong vector in an index.

The cache is an accelerator, never a dependency: every failure (a damaged or locked file, a
full disk, a read-only home) is logged once and indexing goes on embedding as before.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import sys
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "RAG_LSP_CACHE_DIR"  # overrides the platform's user cache folder
FORMAT = 1
# Bytes a row takes besides its vector: key and its index, CRC, timestamp and SQLite's own
# bookkeeping (measured: 100k rows of 384 floats take 170 MB, 1,700 B a row).
ROW_OVERHEAD_BYTES = 164
# Evict down to this share of the cap, so a full cache does not evict on every batch.
EVICT_TO = 0.9
# Another process's write waits this long; then this batch goes without the cache.
BUSY_TIMEOUT_MS = 5_000
RETRY_SECONDS = 300.0  # after a failure, the cache is left alone this long
_DAMAGE_CODES = {getattr(sqlite3, name) for name in ("SQLITE_NOTADB", "SQLITE_CORRUPT")
                 if hasattr(sqlite3, name)}
_SQL_BATCH = 500  # keys per `IN (…)`: well under SQLite's variable limit


def user_cache_dir() -> Path:
    """``$RAG_LSP_CACHE_DIR``, else the platform's per-user cache folder + ``rag-lsp``."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
        return base / "rag-lsp" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "rag-lsp"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag-lsp"


def cache_file(folder: Path, model_id: str, model_sha256: str, tokenizer_sha256: str) -> Path:
    """One file per model id, weights and tokenizer: a vector is the same only if all three
    are."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("_") or "model"
    return folder / "embeddings" / f"{name}-{model_sha256[:16]}-{tokenizer_sha256[:8]}.sqlite3"


class EmbeddingCache:
    """Vectors by text digest (``bytes.fromhex`` of the sha256 the indexer computes).

    Thread-safe; one connection per instance. Use :func:`open_shared` to share one instance
    per file within a process."""

    def __init__(self, path: Path, dimension: int, max_bytes: int):
        self.path = path
        self.dimension = dimension
        self.max_rows = _rows_within(max_bytes, dimension)
        self._lock = threading.Lock()
        self._failed_at: float | None = None  # when it last failed: off until RETRY_SECONDS
        self._warned = False  # a failure is logged once per process
        self._db: sqlite3.Connection | None = None
        self._rows: int | None = None  # row count, counted once, then kept up to date
        self._data_version: int | None = None  # SQLite's: changes when another writer commits

    # ---- the two operations the indexer needs -----------------------------------------

    def get(self, digests: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of these digests (hex), marking them recently used."""
        if not digests:
            return {}
        found: dict[str, np.ndarray] = {}
        damaged: list[bytes] = []
        with self._lock:
            db = self._connect()
            if db is None:
                return {}
            try:
                now = int(time.time())
                for batch in _batches(sorted({bytes.fromhex(d) for d in digests})):
                    marks = ",".join("?" * len(batch))
                    for key, blob, crc in db.execute(
                            f"SELECT key, vector, crc FROM vectors WHERE key IN ({marks})", batch):
                        if len(blob) != self.dimension * 4 or _crc(key, blob) != crc:
                            damaged.append(key)
                            continue
                        found[key.hex()] = np.frombuffer(blob, dtype=np.float32).copy()
                    hits = [k for k in batch if k.hex() in found]
                    if hits:
                        db.execute(f"UPDATE vectors SET used = ? WHERE key IN "
                                   f"({','.join('?' * len(hits))})", [now, *hits])
                if damaged:
                    log.warning("embedding cache %s: %d damaged vectors dropped (they are "
                                "embedded again)", self.path, len(damaged))
                    self._delete(db, damaged)
                db.commit()
            except sqlite3.Error as exc:
                self._fail(exc)
                return {}
            except BaseException:
                db.rollback()  # never leave other processes waiting on our transaction
                raise
        return found

    def put(self, vectors: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store freshly embedded vectors (digest hex → vector), then evict past the cap."""
        rows = []
        now = int(time.time())
        for digest, vector in vectors:
            blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
            if len(blob) == self.dimension * 4:
                key = bytes.fromhex(digest)
                rows.append((key, blob, _crc(key, blob), now))
        if not rows:
            return
        with self._lock:
            db = self._connect()
            if db is None:
                return
            try:
                self._follow_other_writers(db)
                known, before = self._count(db), db.total_changes
                db.executemany("INSERT OR IGNORE INTO vectors (key, vector, crc, used) "
                               "VALUES (?, ?, ?, ?)", rows)
                self._rows = known + (db.total_changes - before)
                evicting = self._rows > self.max_rows
                if evicting:
                    self._evict(db)
                db.commit()
                if evicting:
                    self._vacuum(db)
            except sqlite3.Error as exc:
                self._fail(exc)
            except BaseException:
                db.rollback()
                raise

    # ---- housekeeping --------------------------------------------------------------------

    def rows(self) -> int:
        with self._lock:
            db = self._connect()
            return 0 if db is None else self._count(db)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _follow_other_writers(self, db: sqlite3.Connection) -> None:
        """Another process wrote since we counted: count again (else each process would
        evict only past the cap plus its own additions)."""
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._data_version, self._rows = version, None

    def _count(self, db: sqlite3.Connection) -> int:
        if self._rows is None:
            self._rows = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        return self._rows

    def _evict(self, db: sqlite3.Connection) -> None:
        """Drop the least recently used rows, down to ``EVICT_TO`` of the cap. Another
        process may have added rows meanwhile: the count is taken afresh. Ties (a batch
        shares its time) go in insertion order, so whole pages empty and are given back
        (in key order, evicting 10 % of a 4 MB cache left the file at 7 MB)."""
        self._rows = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        excess = self._rows - int(self.max_rows * EVICT_TO)
        if excess <= 0:
            return
        db.execute("DELETE FROM vectors WHERE key IN "
                   "(SELECT key FROM vectors ORDER BY used, rowid LIMIT ?)", (excess,))
        self._rows -= excess

    def _vacuum(self, db: sqlite3.Connection) -> None:
        """Give evicted rows' pages back to the file system. ``incremental_vacuum`` frees one
        page per step, so it is stepped to the end (``executescript``), after the commit."""
        if db.execute("PRAGMA freelist_count").fetchone()[0]:
            db.executescript("PRAGMA incremental_vacuum;")

    def _delete(self, db: sqlite3.Connection, keys: list[bytes]) -> None:
        for batch in _batches(keys):
            db.execute(f"DELETE FROM vectors WHERE key IN ({','.join('?' * len(batch))})",
                       batch)
        self._rows = None

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_SECONDS:
            return None
        self._failed_at = None
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):  # locked, read-only, disk full: not ours to delete
                self._fail(exc)
                return None
            # Not a database (a damaged file): it holds nothing that cannot be recomputed.
            log.warning("embedding cache %s is damaged (%s); starting it afresh", self.path, exc)
            try:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                self._db = self._open()
            except (OSError, sqlite3.Error) as again:
                self._fail(again)
        except OSError as exc:
            self._fail(exc)
        return self._db

    def _open(self) -> sqlite3.Connection:
        # Owner-only: vectors hold no text, but they say something of the code.
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000,
                             check_same_thread=False)
        try:
            # Both take effect on a new file only. 1.6 kB rows fill 16 kB pages well (two to a
            # 4 kB page left 2.1 kB a row).
            db.execute("PRAGMA page_size = 16384")
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")  # a crash may lose the last rows: fine
            # A rowid table: rows of 1.5 kB in a WITHOUT ROWID table took 4.7 kB each.
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB NOT NULL UNIQUE, "
                       "vector BLOB NOT NULL, crc INTEGER NOT NULL, used INTEGER NOT NULL)")
            db.execute("CREATE INDEX IF NOT EXISTS vectors_by_use ON vectors (used)")
            db.execute("CREATE TABLE IF NOT EXISTS about (key TEXT PRIMARY KEY, value TEXT)")
            db.execute("INSERT OR IGNORE INTO about VALUES ('format', ?), ('dimension', ?)",
                       (str(FORMAT), str(self.dimension)))
            about = dict(db.execute("SELECT key, value FROM about"))
            db.commit()
        except BaseException:
            db.close()
            raise
        if about.get("format") != str(FORMAT) or about.get("dimension") != str(self.dimension):
            db.close()
            raise _NotOurs(f"written as format {about.get('format')} with dimension "
                           f"{about.get('dimension')}")
        return db

    def _fail(self, exc: Exception) -> None:
        """Log once and go on without the cache (it only saves time); try again in a while
        (a lock held by a crashed process, a full disk, may pass)."""
        if not self._warned:
            log.warning("embedding cache %s is not usable (%s); chunks are embedded without "
                        "it for now. Set embeddingCache to false to stop using it.",
                        self.path, exc)
        self._warned = True
        self._failed_at = time.monotonic()
        if self._db is not None:
            self._db.close()
            self._db = None


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """A file that is not (or no longer) a database of ours, as opposed to one that is busy,
    read-only or on a full disk."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code in _DAMAGE_CODES or isinstance(exc, _NotOurs)


class _NotOurs(sqlite3.DatabaseError):
    """A database of another format or dimension."""


def _rows_within(max_bytes: int, dimension: int) -> int:
    return max(1, max_bytes // (dimension * 4 + ROW_OVERHEAD_BYTES))


def _crc(key: bytes, blob: bytes) -> int:
    return zlib.crc32(blob, zlib.crc32(key))


def _batches(items: list[bytes]) -> Iterable[list[bytes]]:
    for start in range(0, len(items), _SQL_BATCH):
        yield items[start:start + _SQL_BATCH]


_SHARED: dict[Path, EmbeddingCache] = {}
_SHARED_LOCK = threading.Lock()


def open_shared(folder: Path, model_id: str, model_sha256: str, tokenizer_sha256: str,
                dimension: int, max_bytes: int) -> EmbeddingCache:
    """The process's one instance for this model's cache file (created on first use)."""
    path = cache_file(folder, model_id, model_sha256, tokenizer_sha256)
    with _SHARED_LOCK:
        cache = _SHARED.get(path)
        if cache is None:
            cache = _SHARED[path] = EmbeddingCache(path, dimension, max_bytes)
        cache.max_rows = _rows_within(max_bytes, dimension)  # the setting may have changed
        return cache


def close_all() -> None:
    """Close every shared instance (tests; a process that is done indexing)."""
    with _SHARED_LOCK:
        for cache in _SHARED.values():
            cache.close()
        _SHARED.clear()
