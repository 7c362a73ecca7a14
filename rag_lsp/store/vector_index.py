"""Nearest chunks in a large index: an approximate (ANN) index in LanceDB, not a matrix in memory.

Up to :data:`MATRIX_MAX_ROWS` chunks every vector is held in memory and searched exactly
(``rag_lsp.store.vector_cache``). Past that the matrix costs more memory than a process should
hold for one workspace (100k chunks x 384 floats = 154 MB, and as much again while a reload
reads it after each write), so the writer builds an IVF index with RaBitQ-quantised vectors
(``RQ_BITS`` bits a dimension) and searches ask LanceDB: the quantised vectors of at least
``NPROBES`` partitions (more when a filter leaves too few rows in them) pick
``limit x REFINE_FACTOR`` candidates, and their full vectors re-rank them, so the cosines a
search ranks by are exact. LanceDB reads the whole index into its cache after a few searches
(every partition is probed at these sizes), so its size is memory the searching process
holds: at 100k chunks 23 MB against 39 for the 8-bit scalar quantisation rag-lsp built before
the fortieth session, which an ``optimize`` trains again as this kind
(:func:`of_an_older_kind`; until then it answers searches as before). Rows written after the
index was built are searched exhaustively until ``optimize`` folds them in; once the table
has grown to ``RETRAIN_GROWTH`` times the rows the partitions were trained on, they are
trained again.

LanceDB folds the rows each ``optimize`` finds into a new *segment* of the index (a delta
index of their own; it merges segments only when a partition outgrows its size), and a query
searches every segment. On the real 100k-chunk index (bench/vector_index.py --segments), the
store's vector query took 14.4 ms (p50) in 1 segment, 20.3 in 6, 23.5 in 12 and 25.8 in 24;
a day of edits had left 25. Segments also keep LanceDB from merging the fragments they cover,
so a table's fragments pile up with them. Past ``MAX_SEGMENTS`` the index is trained again,
as one segment, at any size (a table that shrank below the size keeps its index, which
filtered searches use), and ``ChunkStore.optimize`` compacts again after: training took
1.5-1.7 s of both cores on the compacted table, 15.5-15.7 s on the fragments (and their
deleted rows) that day had left. With at most ``MAX_SEGMENTS`` there are few fragments left
to train on; an index found in many (an older rag-lsp's) pays the slow training once.
Training samples ``SAMPLE_RATE`` rows a partition; LanceDB's default (256,
nearly every row at 100k chunks) took 4.2 s compacted and 59 s uncompacted, with the same
recall (1.000).

bench/vector_index.py --kinds sq,rq: on 36k chunks of real code and text (the code
benchmark's ten repositories and two more indexes) both kinds found all of the exact 10 and 70
nearest of 190 questions; on 100k chunks with random stand-in vectors, the hardest case, this
kind found 0.9995 and 0.990 of them (8-bit: 1.000), its index 21 MB on disk against 38, the
store's vector query 14.9 / 18.1 ms (p50 / p95) against 12.7 / 16.0. Product quantisation
(48 bytes a chunk) took 63 s to build and found 0.91 of the exact 70 nearest with a refine
factor of 5; on the random vectors RaBitQ with 3 bits found 0.93 of them, with 2 bits 0.82
(refine factor 3).
"""

from __future__ import annotations

import os
import re
from typing import Any

from lancedb.index import IvfRq

# Near this size a server holding the matrix (and the columns, postings and text loaded with
# it) took 419-423 MB idle and 474-487 while re-indexing, at 47.5k chunks; with the ANN index
# from 20k chunks instead (a trial) 302 and 351-361, but a search's p95 was 41 ms idle and 56
# during a re-index against 26 and 31-34; at 23.7k chunks of real vectors 38 and 55 ms against
# 22 and 26, for 22-96 MB less (bench/README.md, "Near 50k chunks"). Since the matrix holds
# 8-bit codes (its float32 vectors in a file), 352-357 MB idle and 402-412 re-indexing
# (bench/README.md, "The in-memory copy in 8 bits").
MATRIX_MAX_ROWS = 50_000
# Chunks from which a compaction runs in a child process, up to MATRIX_MAX_ROWS (see
# compacts_in_a_child). A re-index at 23.7k chunks took the language server from 380 MB idle to
# 472-477, the compaction +50-66 MB of it (bench/README.md, "A server of 1,000 files"); at 12k
# chunks it added ~54 MB. Below 10k the process is small enough, and a child's start (a run's
# compaction took ~0.7 s longer, at the background priority) would cost more than it spares.
COMPACT_IN_CHILD_MIN_ROWS = 10_000
NPROBES = 20
REFINE_FACTOR = 2
RETRAIN_GROWTH = 2.0
MAX_SEGMENTS = 4
SAMPLE_RATE = 64
# Bits a dimension in the index's quantised vectors (RaBitQ): 4 found every one of the exact 70
# nearest of real chunks with refine factor 2, 0.990 of them on random vectors, where 3 bits
# found 0.929, and 2 bits 0.821 even with refine factor 3 (bench/README.md, "An index of half
# the size").
RQ_BITS = 4
INDEX_TYPES = {"IVF_RQ", "IvfRq"}
# Indexes an older rag-lsp built: they answer searches (refined, so the cosines are exact)
# until the next optimize trains the current kind in their place.
OLDER_INDEX_TYPES = {"IVF_SQ", "IvfSq"}
VECTOR_INDEX_TYPES = INDEX_TYPES | OLDER_INDEX_TYPES
# The index's name records the rows it was trained on: vector_idx_<rows>.
_NAME = re.compile(r"vector_idx_(\d+)")


def trained_rows(table: Any) -> int | None:
    """Rows the ANN index on ``table``'s vectors was trained on; ``None`` without one (0 for
    an index not named by :func:`build_vector_index`)."""
    found = None
    for index in table.list_indices():
        if tuple(index.columns) == ("vector",) and index.index_type in VECTOR_INDEX_TYPES:
            named = _NAME.fullmatch(index.name)
            found = max(found or 0, int(named.group(1)) if named else 0)
    return found


def index_segments(table: Any) -> int:
    """Segments of the ANN index on ``table``'s vectors (0 without one): its first build
    and one delta for each ``optimize`` that found new rows since."""
    segments = 0
    for index in table.list_indices():
        if tuple(index.columns) == ("vector",) and index.index_type in VECTOR_INDEX_TYPES:
            stats = table.index_stats(index.name)  # None: dropped meanwhile
            segments += (stats.num_indices or 1) if stats is not None else 0
    return segments


def of_an_older_kind(table: Any) -> bool:
    """Whether ``table``'s ANN index is of a kind an older rag-lsp built (8-bit scalar
    quantisation, twice the size of this one's in memory and on disk)."""
    return any(tuple(index.columns) == ("vector",) and index.index_type in OLDER_INDEX_TYPES
               for index in table.list_indices())


def answers_alone(rows: int, trained: int | None) -> bool:
    """Whether a table of ``rows`` chunks is searched through its ANN index alone (nothing
    held in memory)."""
    return rows > MATRIX_MAX_ROWS and trained is not None


def compacts_in_a_child(rows: int) -> bool:
    """Whether compacting a chunks table of ``rows`` rows is worth a process of its own
    (rag_lsp.store.retraining): from COMPACT_IN_CHILD_MIN_ROWS up to the size below which
    the process holds the in-memory copy of every vector and column, under which LanceDB's
    compaction (of the whole table, each time one is due) came on top. Past that size
    nothing is held, and a compaction in a child was measured twice and not adopted
    (bench/README.md, "Two more tried at 100k chunks", "Searches beside a compaction at 100k
    chunks"): the second time 10-25 MB off the server's peak, for ~1 s more a compaction (a
    saved file's update too), slower searches during the second re-index in both pairs, and
    the server and its children together 79-97 MB higher. POSIX only (the child's priority,
    its lifeline)."""
    return COMPACT_IN_CHILD_MIN_ROWS <= rows <= MATRIX_MAX_ROWS and os.name == "posix"


def trains_in_a_child(rows: int) -> bool:
    """Whether training on ``rows`` rows, and the compaction after, is worth a process of its
    own (rag_lsp.store.retraining): past the size, where both hold on the order of the vector
    column. Below it (a table that shrank, its index in too many segments) they are small.
    POSIX only (the child's priority, its lifeline)."""
    return rows > MATRIX_MAX_ROWS and os.name == "posix"


def needs_training(rows: int, trained: int | None, segments: int = 1,
                   older_kind: bool = False, max_segments: int | None = None) -> bool:
    """Whether a table of ``rows`` chunks should (re)build its ANN index, trained on
    ``trained`` rows (None: it has none), in ``segments`` pieces (more than
    ``max_segments``, by default MAX_SEGMENTS, are too many), and of an ``older_kind``
    than this rag-lsp builds. Fewer segments than MAX_SEGMENTS are asked for only past
    MATRIX_MAX_ROWS, where every search uses the index (below, only filtered ones do, and
    the training would run in this process)."""
    too_many = (max_segments if max_segments is not None and rows > MATRIX_MAX_ROWS
                else MAX_SEGMENTS)
    if trained is not None and (segments > too_many or older_kind) and rows > 0:
        return True
    return rows > MATRIX_MAX_ROWS and (trained is None or rows > RETRAIN_GROWTH * trained)


def build_vector_index(table: Any, rows: int, config: Any = None) -> None:
    """Train and write the ANN index on ``rows`` rows, then drop any older one (the caller
    holds the writer lock, or the process that started it does: rag_lsp.store.retraining).
    Until the drop, searches use either: both are complete. ``config``: another kind of
    index than this one's (bench/vector_index.py compares them)."""
    name = f"vector_idx_{rows}"
    if config is None:
        config = IvfRq(distance_type="cosine", num_bits=RQ_BITS, sample_rate=SAMPLE_RATE)
    table.create_index("vector", config=config, name=name, replace=True)
    for index in table.list_indices():
        if (tuple(index.columns) == ("vector",) and index.index_type in VECTOR_INDEX_TYPES
                and index.name != name):
            table.drop_index(index.name)


def approximate(query: Any) -> Any:
    """A LanceDB vector query tuned for the index above."""
    return query.minimum_nprobes(NPROBES).maximum_nprobes(0).refine_factor(REFINE_FACTOR)
