"""What LanceDB may cache for one index: bounded, sized to the index, and let go of around
each compaction.

LanceDB caches what it has opened, per connection: index data (an IVF partition's quantised
vectors, a full-text index's postings) up to 6 GiB and file metadata (manifests, fragments,
deletion files) up to 1 GiB, unless told otherwise. Its entries are keyed by index file and
table version, and every compaction writes new index files (a new segment of the ANN index,
the full-text indexes merged again) and new versions. So a long-running server kept every
version it had searched: on the stand-in 100k-chunk index, a process that saved 3 files,
indexed them and searched, 40 times over, grew from 348 to 1,237 MB, ~10 MB a save and ~50
more each time the ANN index was trained again (bench/edit_memory.py).

Two rules:
- The writer connects again after each compaction that changed the table
  (``ChunkStore.optimize``): the old connection's caches go with it, and the current
  version's index data is read into empty ones, partly by the writer itself (a few lookups,
  ``ChunkStore._warm_caches``), the rest by the searches. The full-text indexes are new after
  a compaction anyway; the ANN index's first segment, unchanged between trainings, is read
  again. It connects again before the compaction too, when its caches hold
  :data:`LET_GO_BEFORE_COMPACTION_BYTES` or more (``ChunkStore._let_go_of_caches``): what they
  hold is of the version the compaction replaces, and it sat under the compaction's own
  memory at its peak (43-49 MB at 100k chunks; bench/README.md, "LanceDB's caches let go of
  before a compaction").
- Every connection's caches are bounded: index data :data:`INDEX_CACHE_BYTES_PER_ROW` a
  chunk, at least :data:`INDEX_CACHE_MIN_BYTES`; metadata :data:`METADATA_CACHE_BYTES`. That
  bounds what a reader that never compacts (a CLI, an MCP server beside the writer) gathers
  as it follows the writer's versions.

What one version's searches read, measured: 48 MB on the stand-in 100k-chunk index (27 MB of
full-text index, the rest the ANN index's), ~1 MB of metadata. (Measured apart since, on a
table of the same vectors alone: LanceDB reads the whole ANN index within ten searches, 39 MB
of 8-bit vectors, 23 MB of the RaBitQ codes the store builds since the fortieth session;
bench/README.md, "An index of half the size".) Real code has more words: the
full-text indexes of lancedb/lance's sources (31k chunks, mostly Rust) took 481 bytes a chunk
in the cache against 275 for the stand-in's, so ~70 MB at 100k chunks of code. A cache
smaller than what searches read costs far more than the memory it saves: capped at 16 MB,
searches at 100k chunks took 154 ms instead of 58 (p50).

A store made empty and filled by its first index outgrows the caches it was opened with;
:func:`outgrown` tells it when to connect again with larger ones: the writer after a
compaction, a reader when it first reads a version of the grown table
(``ChunkStore._fit_caches``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import lancedb

INDEX_CACHE_MIN_BYTES = 64 * 1024 * 1024
INDEX_CACHE_BYTES_PER_ROW = 1024
METADATA_CACHE_BYTES = 16 * 1024 * 1024
# A writer connects again before a compaction too (ChunkStore._let_go_of_caches) once its caches
# hold this much: below it there is little to take off the compaction's peak, not worth a new
# connection. Not tuned: at 100k chunks they held 43-49 MB, where searches beside a compaction
# took the same time either way.
LET_GO_BEFORE_COMPACTION_BYTES = 8 * 1024 * 1024
# When an index is opened, or a compaction changed nothing, a store connects again only once
# its rows want this much more index cache than it has.
REFIT_GROWTH = 1.25


def index_cache_bytes(rows: int) -> int:
    """The index cache for a chunks table of ``rows`` rows."""
    return max(INDEX_CACHE_MIN_BYTES, rows * INDEX_CACHE_BYTES_PER_ROW)


def outgrown(cache_bytes: int, rows: int) -> bool:
    """Whether a connection with an index cache of ``cache_bytes`` should make way for one
    sized to ``rows`` rows."""
    return index_cache_bytes(rows) > REFIT_GROWTH * cache_bytes


def worth_letting_go(held_bytes: int) -> bool:
    """Whether a writer holding ``held_bytes`` in its caches should let go of them before a
    compaction."""
    return held_bytes >= LET_GO_BEFORE_COMPACTION_BYTES


def new_session(cache_bytes: int) -> lancedb.Session:
    """Caches of their own for one connection: ``cache_bytes`` of index data and
    :data:`METADATA_CACHE_BYTES` of metadata."""
    return lancedb.Session(index_cache_size_bytes=cache_bytes,
                           metadata_cache_size_bytes=METADATA_CACHE_BYTES)


def connect(index_dir: Path, session: lancedb.Session) -> lancedb.DBConnection:
    """A connection to the index folder that caches in ``session``. Read consistency
    interval 0: each read checks for a newer version (a cheap file listing), so a process
    that reads follows one that writes."""
    return lancedb.connect(str(index_dir), read_consistency_interval=timedelta(0),
                           session=session)
