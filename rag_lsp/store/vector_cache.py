"""Every chunk vector of the current table version in memory, for exact nearest neighbours.

LanceDB's brute-force vector search costs ~15-25 ms per query at 10k chunks on two cores,
nearly all of it overhead; one matrix-vector product over the same vectors takes under 1 ms
(12k x 384 float32 = 18 MB). The matrix holds each vector as 8-bit codes (400 bytes a row), its
float32 vectors kept in a file past a size, in memory below it, and a search ranks by the exact
cosines (see rag_lsp.store.packed_vectors). The matrix belongs to one table version. After
this process's own writes it is patched (the changed files' rows read again and appended, the
rows they replace masked out; after a compaction, only new row ids): while such a write runs,
searches keep the matrix of the version before it. After anyone else's write the store falls
back to LanceDB until a background reload (at most one every few seconds, so an indexing run
is not slowed down) has caught up. Row ids (``_rowid``) find the rows again.

Up to a size the load also keeps the columns a search ranks by, as Arrow arrays: reading the
~70 rows each retriever finds back from LanceDB cost ~4 ms a read, two or three reads a search
(bench/README.md, "Ranking columns in memory"). Not each row's terms: the postings say which
of a search's words a row has (see VectorMatrix.rows_at).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag_lsp.memory import return_freed_memory
from rag_lsp.priority import run_in_background
from rag_lsp.store import packed_vectors
from rag_lsp.store.packed_vectors import (
    ExactVectors,
    HeldVectors,
    exact_vectors_for,
    pack,
    packed_width,
    slots,
)
from rag_lsp.store.term_index import LivePostings, TermIndex, TermIndexBuilder
from rag_lsp.terms import path_terms

log = logging.getLogger(__name__)

# Once the writes settle, the copy is made compact if they left at least this share of its
# live rows' worth to score beyond it (masked rows, replaced rows' vectors): after a re-index
# of 30 % of the files at ~12k chunks ~0.34, after a save of one file ~0.004.
SETTLE_SHARE_MIN = 0.05
RELOAD_INTERVAL_SECONDS = 5.0  # while the table keeps changing, reload at most this often
# A patch appends the changed files' rows and masks out the rows they replace (see
# VectorMatrix.patched); once more than this share of the rows is masked out, it makes one
# compact copy instead.
DEAD_SHARE_MAX = 0.25

T = TypeVar("T")


class ProcessEnding(Exception):
    """The interpreter has begun to shut down: a load under way stops (see
    :func:`while_process_runs`)."""


def while_process_runs(batches: Iterable[T]) -> Iterator[T]:
    """``batches``, one at a time, until the interpreter begins to shut down (see
    :func:`shutting_down`); then :class:`ProcessEnding`. A process waits for a load under way
    before it ends (see ``VectorCache._reload_soon``): a one-shot search would otherwise wait
    for the whole table to load before exiting (1.3 s more at 45k chunks), where now it waits
    for one batch. (A program that serves from other threads after its main thread has ended
    gets no in-memory copy: its searches ask LanceDB.)"""
    iterator = iter(batches)
    while not shutting_down():
        try:
            batch = next(iterator)
        except StopIteration:
            return
        yield batch
    raise ProcessEnding


def shutting_down() -> bool:
    """Whether the interpreter has begun to shut down. threading sets ``_SHUTTING_DOWN``
    first thing in its shutdown and it is read without a lock; ``main_thread().is_alive()``
    (the fallback, should the flag go) takes the main thread's lock, which can race with the
    shutdown's own use of it on CPython 3.10-3.12 (cpython#116372)."""
    flag = getattr(threading, "_SHUTTING_DOWN", None)
    if isinstance(flag, bool):
        return flag
    return not threading.main_thread().is_alive()


# A joined column at least this large hands back the heap its pieces took (see _KeptColumns)
_HAND_BACK_AFTER_BYTES = 1024 * 1024


class _KeptColumns:
    """Columns gathered batch by batch, each batch's copied into buffers of their own as it
    comes (a batch may be a slice of a larger read, whose buffers the slice would keep whole
    until the end), then joined into one array each, one column at a time, each column's
    pieces let go as it is joined: the join holds one column twice at a time, not all of
    them (at 47.5k chunks the whole table's join added 23 MB at the end of the load;
    bench/README.md, "The copy's load in pages")."""

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self.schema: pa.Schema | None = None
        self._pieces: dict[str, list[pa.Array]] = {name: [] for name in self.names}

    def add(self, batch: pa.RecordBatch) -> bool:
        """Keep ``batch``'s columns; ``False`` when it lacks one (then nothing is kept)."""
        if not set(self.names) <= set(batch.schema.names):
            return False
        if self.schema is None:
            self.schema = pa.schema([batch.schema.field(name) for name in self.names])
        for name in self.names:
            self._pieces[name].append(pa.concat_arrays([batch.column(name)]))
        return True

    def joined(self) -> pa.Table | None:
        """The columns as one table (``None`` if no batch came); call it once."""
        if self.schema is None:
            return None
        joined = []
        for name in self.names:
            joined.append(pa.concat_arrays(self._pieces.pop(name)))
            # The pieces are small buffers, in the heap: freed, they stay resident until
            # handed back, and the next column's array would come on top of them (a
            # patch's few rows are not worth the ~1 ms).
            if joined[-1].nbytes >= _HAND_BACK_AFTER_BYTES:
                return_freed_memory()
        return pa.Table.from_arrays(joined, schema=self.schema)


# Spare rows a room has at least (see Room)
ROOM_MIN_ROWS = 64
# Rows a compaction in place moves at a time (each block is copied out first: 6 MB).
MOVE_BLOCK_ROWS = 4096


def _mover(vectors: np.ndarray, kept_at: np.ndarray, added: np.ndarray) -> Callable[[], None]:
    """The move of the rows ``kept_at`` (ascending) of ``vectors`` to its first rows, in
    order, then of ``added`` after them. Block by block: a block's rows are copied out
    before they are written, and go no further than rows already read (the ``i``-th kept
    row moves to row ``i <= kept_at[i]``), so no row is overwritten before it is read."""
    def move() -> None:
        moved = np.flatnonzero(kept_at != np.arange(len(kept_at)))
        first = int(moved[0]) if len(moved) else len(kept_at)  # rows before stay put
        # One block buffer for all (a new one each time was mapped and faulted in again),
        # and a take not in its "raise" mode (that one copies into a buffer of its own).
        block = np.empty((min(MOVE_BLOCK_ROWS, len(kept_at) - first), vectors.shape[1]),
                         dtype=vectors.dtype)
        for start in range(first, len(kept_at), MOVE_BLOCK_ROWS):
            at = kept_at[start:start + MOVE_BLOCK_ROWS]
            np.take(vectors, at, axis=0, out=block[:len(at)], mode="clip")
            vectors[start:start + len(at)] = block[:len(at)]
        vectors[len(kept_at):len(kept_at) + len(added)] = added
    return move


class Room:
    """An array of packed vectors (see rag_lsp.store.packed_vectors) with room after its rows
    for those patches append (see ``VectorMatrix._appended``). The room goes to one patch at a
    time: a matrix held by a search only sees its own rows, and a second patch of the same
    matrix makes a compact copy instead of writing over the first one's rows. A compaction in
    place takes the whole array over (see ``VectorMatrix.pending_move``)."""

    def __init__(self, rows: int, width: int):
        """An array for ``rows`` rows of ``width`` bytes, which its maker fills, and a
        quarter more. The room costs address space, not memory, until patches write to it:
        the pages of a large array are mapped when first written (see
        rag_lsp.memory.MMAP_THRESHOLD_BYTES)."""
        self.vectors = np.empty((rows + max(ROOM_MIN_ROWS, rows // 4), width), dtype=np.int8)
        self._used = rows
        self._lock = threading.Lock()

    def fitted(self, rows: int) -> None:
        """Its maker filled ``rows`` rows (into the spare ones too, when more came than it
        was made for)."""
        with self._lock:
            self._used = rows

    def take_over(self, rows: int, kept: int) -> bool:
        """Whether the caller, the matrix of the first ``rows`` rows and the last one made
        in this room, may move ``kept`` rows to the start in place; if so, the room holds
        those from now on (see VectorMatrix.pending_move). Not when they would leave less
        than an eighth of them spare (each patch after would compact again: a new array
        with a quarter spare does better), nor when they fill less than half the array (its
        pages stay resident: after a large deletion a right-sized copy is small)."""
        capacity = len(self.vectors)
        with self._lock:
            if (self._used != rows or kept + max(ROOM_MIN_ROWS, kept // 8) > capacity
                    or kept < capacity // 2):
                return False
            self._used = kept
            return True

    def claim(self, rows: int, count: int) -> bool:
        """Whether the ``count`` rows after the first ``rows`` are free for the caller (the
        matrix of those first rows is the last one made in this room, and they fit)."""
        with self._lock:
            if self._used != rows or rows + count > len(self.vectors):
                return False
            self._used = rows + count
            return True


@dataclass(frozen=True)
class VectorMatrix:
    version: int
    row_ids: np.ndarray  # uint64, one per row
    # int8, a row each: the vector's 8-bit codes, scale, bound and slot in ``exact`` (see
    # rag_lsp.store.packed_vectors)
    vectors: np.ndarray
    sorted_ids: np.ndarray  # row ids in ascending order …
    sorted_rows: np.ndarray  # … and the row of ``vectors`` each one is in
    # Full-text postings of the same rows (row numbers as in ``vectors``), when the batches
    # carried ``terms``, ``defines`` and ``path`` (see rag_lsp.store.term_index)
    terms: LivePostings | None = None
    names: LivePostings | None = None
    # The columns a search ranks by, row by row as in ``vectors`` (see :meth:`rows_at`),
    # with the chunks' ``text`` when it fitted in the budget
    columns: pa.Table | None = None
    # Rows that this process's writes have replaced since the load stay where they are,
    # masked out: one bool per row (``None``: every row is live). See :meth:`patched`.
    alive: np.ndarray | None = None
    # The array whose first rows ``vectors`` is, with room for the rows patches append
    # (``None``: none), and how many of the rows patches appended (the last ones)
    room: Room | None = None
    appended_rows: int = 0
    # A compaction in place (see _compacted): the move of the live vectors to their new
    # rows in the room they share with the matrix patched. Until it has run (see
    # :meth:`settled`) this matrix's vectors are not its own, and after it that matrix's
    # are not: the holder runs it as it swaps this one in, readers retrying meanwhile (see
    # VectorCache.consistent).
    pending_move: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    # The float32 vectors, in a file or, for a small copy, in memory (see packed_vectors)
    exact: ExactVectors | HeldVectors = field(kw_only=True, compare=False, repr=False)

    @classmethod
    def from_batches(cls, version: int, batches: Iterable[pa.RecordBatch], rows: int,
                     dim: int, row_columns: Sequence[str] = (),
                     text_bytes: int = 0, extending: VectorMatrix | None = None,
                     exact_folder: Path | None = None) -> VectorMatrix:
        """The matrix from record batches of ``_rowid`` and ``vector`` (about ``rows`` rows),
        copied batch by batch into one array: reading the whole column at once held it three
        times over (Arrow table, combined chunks, NumPy copy), 300 MB more at 100k chunks.
        Batches that also carry ``terms``, ``defines`` and ``path`` give the postings too,
        and ``row_columns``, when they carry them, are kept (see :meth:`rows_at`), with
        ``text`` when they carry it and all of it takes at most ``text_bytes``: each batch's
        copied as it comes, since a batch may be a slice of a larger read, which the slice
        would keep whole until the end (at 23.7k chunks the load peaked 77 MB above what it
        then held, 36 MB with the copies; bench/README.md, "The in-memory copy's load"). With
        ``extending``, the postings number terms as that matrix's do (see :meth:`patched`),
        and the exact vectors go where its go; else to a new file in ``exact_folder``, or
        memory for a small copy (see packed_vectors.exact_vectors_for)."""
        exact = (extending.exact if extending is not None
                 else exact_vectors_for(rows, dim, exact_folder))
        width = packed_width(dim)
        # A load's vectors go into a room, so that the first patch after it appends there
        # instead of copying them all into one (see _appended).
        room = Room(rows, width) if rows else None
        vectors = room.vectors if room is not None else np.empty((0, width), dtype=np.int8)
        row_ids = np.empty(rows, dtype=np.uint64)
        words = {"terms": TermIndexBuilder(extending=extending and extending.terms,
                                           expected_rows=rows),
                 "defines": TermIndexBuilder(lower=True, expected_rows=rows,
                                             extending=extending and extending.names)}
        with_words = False
        kept = _KeptColumns(row_columns) if row_columns else None
        texts: list[pa.Array] | None = [] if row_columns and text_bytes > 0 else None
        text_total = 0
        filled = 0
        for batch in batches:
            count = batch.num_rows
            if filled + count > len(row_ids):  # rows were added since they were counted
                row_ids = np.resize(row_ids, filled + count)
            if filled + count > len(vectors):  # past the room too
                vectors, room = np.resize(vectors, (filled + count, width)), None
            flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
            batch_vectors = flat.reshape(count, dim)
            pack(batch_vectors, exact.append(batch_vectors), vectors[filled:filled + count])
            row_ids[filled:filled + count] = batch.column("_rowid").to_numpy()
            if {"terms", "defines", "path"} <= set(batch.schema.names):
                with_words = True
                # A chunk is found by the words of its path too, as in the full-text index.
                paths = batch.column("path")
                unique = pc.unique(paths)
                path_words = pa.array([" ".join(sorted(path_terms(p)))
                                       for p in unique.to_pylist()], pa.string())
                words["terms"].add(batch.column("terms"),
                                   path_words.take(pc.index_in(paths, value_set=unique)))
                words["defines"].add(batch.column("defines"))
            if kept is not None and not kept.add(batch):
                kept = None
            if texts is not None and "text" in batch.schema.names:
                text = batch.column("text")
                text_total += text.nbytes
                texts = (texts + [pa.concat_arrays([text])] if text_total <= text_bytes
                         else None)  # over: none
            else:
                texts = None
            filled += count
        vectors, row_ids = vectors[:filled], row_ids[:filled]
        if room is not None:
            room.fitted(filled)
        order = np.argsort(row_ids, kind="stable")
        overflowed = any(b.overflowed for b in words.values())
        with_words = with_words and not overflowed
        terms = LivePostings.of(words["terms"].finish()) if with_words else None
        names = LivePostings.of(words["defines"].finish()) if with_words else None
        columns = None
        # Postings given up (too many words) take the columns with them, unless those hold
        # each row's terms: the postings give them (see rows_at).
        if kept is not None and not (overflowed and "terms" not in row_columns):
            columns = kept.joined()
            if columns is not None and texts:
                columns = columns.append_column("text", pa.concat_arrays(texts))
        return cls(version, row_ids, vectors, row_ids[order], order, terms, names, columns,
                   room=room, exact=exact)

    def settled(self) -> VectorMatrix:
        """This matrix with its pending move done (see ``pending_move``): from now on the
        matrix it was patched from must not be read."""
        if self.pending_move is None:
            return self
        self.pending_move()
        return replace(self, pending_move=None)

    @property
    def dim(self) -> int:
        return self.exact.dim

    @property
    def holds_text(self) -> bool:
        return self.columns is not None and "text" in self.columns.column_names

    @property
    def live_rows(self) -> int:
        return len(self.row_ids) if self.alive is None else int(np.count_nonzero(self.alive))

    @property
    def unsettled_share(self) -> float:
        """What patches left this matrix scoring beyond a load of its rows, as a share of its
        live rows: rows masked out, and (vectors held in memory) replaced rows' vectors that
        every search still multiplies; 0 for a load or a compact copy (see
        :meth:`compacted_copy`)."""
        live = self.live_rows
        extra = len(self.row_ids) - live
        if self.exact.renewable(len(self.row_ids)):  # as patched decides to write it anew
            extra += max(0, self.exact.rows - live)
        return extra / max(live, 1)

    def compacted_copy(self, text_bytes: int) -> VectorMatrix | None:
        """This matrix of the same version as a load of its live rows would hold them, in one
        compact copy: no row masked out or appended in a second piece, and vectors held in
        memory written anew without the replaced rows'. A patch makes one only past
        ``DEAD_SHARE_MAX``; until then each search pays for what the patches left (at ~12k
        chunks, after re-indexing 30 % of the files, 0.5-0.8 ms a search at the median in the
        bench's final run, 0.1-0.8 over four, the nearest rows ~0.5 of it, in process;
        bench/README.md, "The in-memory copy made compact once the writes settle"). ``None``
        as for :meth:`patched`; the vectors move in place, a move left pending, when they can
        (never when vectors held in memory are written anew: those are copied)."""
        return self.patched(self.version, (), (), text_bytes, in_place=True, compact=True)

    def patched(self, version: int, paths: Iterable[str], batches: Iterable[pa.RecordBatch],
                text_bytes: int, *, in_place: bool = False,
                compact: bool = False) -> VectorMatrix | None:
        """The matrix of ``version``, a table version that differs from this one's only in
        the rows of ``paths``: this matrix's rows of other paths (their row ids unchanged,
        as an append, a delete or a merge of some files leaves them), then the rows of
        ``paths`` as ``batches`` carry them, read as a load reads (see :meth:`from_batches`).
        ``None`` when this matrix does not know its rows' paths (no columns kept), or when its
        exact vectors have outgrown it (see ``ExactVectors.outgrown``): the reload after
        keeps the live rows' only.

        The new rows are appended and the rows they replace masked out (see ``alive``),
        instead of a copy of every row (a one-file patch at 12k chunks: 3.1 against 20.9 ms
        in memory, and no second copy held meanwhile; bench/patch_cost.py). Past
        ``DEAD_SHARE_MAX`` of the rows masked out or appended, with text over its budget
        counting the masked rows', or with no room left for the new rows after this
        matrix's (none, full, or taken by another patch of it), the patch makes one compact
        copy (and always with ``compact``); ``in_place``, its live vectors move within their
        room when they fit there, a move left pending (see ``pending_move``) for the holder
        of this matrix to run."""
        if self.columns is None:
            return None
        # Vectors held in memory are written anew by a compact copy of the live rows (no
        # reload: until one caught up, searches would ask LanceDB); a file, or a copy grown
        # large enough for one, waits for the reload.
        renew = self.exact.outgrown(len(self.row_ids)) or (
            compact and self.exact.renewable(len(self.row_ids))
            and self.exact.rows > self.live_rows)
        if renew and not self.exact.renewable(len(self.row_ids)):
            return None
        dim = self.dim
        changed = pa.array(sorted(set(paths)), pa.string())
        gone = pc.is_in(self.columns.column("path"), value_set=changed)
        keep = ~gone.to_numpy(zero_copy_only=False)
        if self.alive is not None:
            keep &= self.alive
        row_columns = [c for c in self.columns.column_names if c != "text"]
        added = VectorMatrix.from_batches(version, batches, 0, dim, row_columns, text_bytes,
                                          extending=self)
        added_terms = added.terms and added.terms.base
        added_names = added.names and added.names.base
        new = added.columns
        if not len(added.row_ids):  # the files' rows were only deleted
            added_terms = self.terms and TermIndexBuilder(extending=self.terms).finish()
            added_names = self.names and TermIndexBuilder(extending=self.names).finish()
            new = self.columns.schema.empty_table()
        if new is None:  # the batches lacked the columns this matrix keeps
            return None
        rows = len(keep) + len(added.row_ids)
        dead = len(keep) - int(np.count_nonzero(keep))
        # Appended rows are copied again at each patch (their columns and postings), and
        # the text budget of the appended path counts the masked rows' text too: past either,
        # one compact copy (which counts only the live rows' text, as a load does).
        over_budget = self.holds_text and "text" in new.column_names and (
            self.columns.column("text").nbytes + new.column("text").nbytes > text_bytes)
        # And when the room after the rows is full (or another patch of this matrix took
        # it): a new array would copy every vector, the masked ones too, where a compaction
        # copies the live ones, or moves them in place. (A re-index of 10% of 23.7k chunks
        # three times over filled the room before a quarter was masked out, and the copy
        # peaked 51 MB above the process; bench/README.md, "The in-memory copy's room and
        # its compaction".)
        if (compact or renew or over_budget or dead > DEAD_SHARE_MAX * rows
                or self.appended_rows + len(added.row_ids) > DEAD_SHARE_MAX * rows
                or self.room is None or not self.room.claim(len(keep), len(added.row_ids))):
            return self._compacted(version, keep, added, added_terms, added_names, new,
                                   text_bytes, in_place and not renew, renew=renew)
        return self._appended(version, keep, added, added_terms, added_names, new)

    def _appended(self, version: int, keep: np.ndarray, added: VectorMatrix,
                  added_terms: TermIndex | None, added_names: TermIndex | None,
                  new: pa.Table) -> VectorMatrix:
        """Every row of this matrix where it is (those not in ``keep`` masked out), then
        ``added``'s: their vectors go into the room after this matrix's own, which
        :meth:`patched` claimed for them (see :class:`Room`; it also checked the text's
        budget)."""
        rows, count = len(self.row_ids), len(added.row_ids)
        room = self.room
        assert room is not None
        room.vectors[rows:rows + count] = added.vectors
        row_ids = np.concatenate([self.row_ids, added.row_ids])
        order = np.argsort(added.row_ids, kind="stable")
        at = np.searchsorted(self.sorted_ids, added.row_ids[order])
        sorted_ids = np.insert(self.sorted_ids, at, added.row_ids[order])
        sorted_rows = np.insert(self.sorted_rows, at, order + rows)
        alive = np.concatenate([keep, np.ones(count, dtype=bool)])
        terms = names = None
        if self.terms is not None and added_terms is not None:
            terms = self.terms.appended(alive, added_terms)
            names = self.names.appended(alive, added_names)
        held = self.columns
        if "text" in held.column_names and "text" in new.column_names:
            new = new.select(held.column_names)
        else:  # the text for all rows or none (see ChunkStore.fill_text)
            row_columns = [c for c in held.column_names if c != "text"]
            held, new = held.select(row_columns), new.select(row_columns)
        # Two pieces: the rows of the load (or of the last compact copy) as they are, and
        # those appended since in one array (a search takes its rows piece by piece: see
        # rows_at). Only the appended ones are copied.
        pieces = held.to_batches() or [pa.RecordBatch.from_pylist([], schema=held.schema)]
        later = pa.Table.from_batches(pieces[1:] + new.to_batches(), held.schema)
        columns = pa.concat_tables([pa.Table.from_batches(pieces[:1], held.schema),
                                    later.combine_chunks()])
        return VectorMatrix(version, row_ids, room.vectors[:rows + count], sorted_ids,
                            sorted_rows, terms, names, columns, alive, room,
                            self.appended_rows + count, exact=self.exact)

    def _compacted(self, version: int, keep: np.ndarray, added: VectorMatrix,
                   added_terms: TermIndex | None, added_names: TermIndex | None,
                   new: pa.Table, text_bytes: int, in_place: bool = False,
                   renew: bool = False) -> VectorMatrix:
        """The rows of this matrix in ``keep``, then ``added``'s, in one new copy; with
        ``in_place``, the vectors moved within this matrix's room if they fit (see
        ``pending_move``) instead of copied beside it (at 23.7k chunks a copy of the vectors
        is 34 MB held twice, the peak of a re-index: bench/README.md, "The in-memory copy's
        room and its compaction")."""
        # What the write before left freed goes back first (~3 ms, once every few thousand
        # rows written): the copy's columns and postings are new pages on top of the
        # process (at 23.7k chunks a re-index's peak was 12-16 MB lower for it).
        return_freed_memory()
        width = self.vectors.shape[1]
        row_columns = [c for c in self.columns.column_names if c != "text"]
        kept_at = np.flatnonzero(keep)
        kept_rows = len(kept_at)
        rows = kept_rows + len(added.row_ids)
        pending_move = None
        if in_place and self.room is not None and self.room.take_over(len(self.row_ids), rows):
            room = self.room
            vectors = room.vectors[:rows]
            pending_move = _mover(room.vectors, kept_at, added.vectors)
        else:
            # Into one new array (a masked copy then a concatenation took 45-80 ms at 12k
            # chunks). A take not in its "raise" mode: that one (and np.compress, which
            # calls it) copies into a buffer of its own first, then into ``out``: 10.8
            # against 3.0 ms for 12k x 384, twice the pages faulted in.
            room = Room(rows, width)  # the patches after it append there
            vectors = room.vectors[:rows]
            np.take(self.vectors, kept_at, axis=0, out=vectors[:kept_rows], mode="clip")
            vectors[kept_rows:] = added.vectors
        exact = self.exact
        if renew:  # the live rows' vectors alone, in a store of their own (see patched)
            exact = exact.of_slots(slots(vectors, self.dim))
            slots(vectors, self.dim)[:] = np.arange(rows)
        row_ids = np.concatenate([self.row_ids[keep], added.row_ids])
        order = np.argsort(row_ids, kind="stable")
        terms = names = None
        if self.terms is not None and added_terms is not None:
            terms = self.terms.compacted(keep, added_terms)
            names = self.names.compacted(keep, added_names)
        # The text for all rows or none (see ChunkStore.fill_text).
        column_names = (self.columns.column_names
                        if "text" in self.columns.column_names and "text" in new.column_names
                        else row_columns)
        both = pa.concat_tables([self.columns.select(column_names), new.select(column_names)])
        rows_kept = pa.array(np.concatenate([keep, np.ones(new.num_rows, dtype=bool)]))
        # Column by column, each one's kept rows filtered, then joined into one piece, so
        # that only one column is held twice at a time (the whole table was: ~20 MB at
        # 23.7k chunks, the peak of a patch that compacts).
        columns = pa.Table.from_arrays(
            [both.column(name).filter(rows_kept).combine_chunks() for name in column_names],
            schema=both.schema)
        if "text" in column_names and columns.column("text").nbytes > text_bytes:
            columns = columns.select(row_columns)
        return VectorMatrix(version, row_ids, vectors, row_ids[order], order, terms, names,
                            columns, room=room, pending_move=pending_move, exact=exact)

    def relabelled(self, version: int, ids: pa.Array, row_ids: np.ndarray) -> VectorMatrix | None:
        """The matrix of ``version``, a table version with the same rows as this one's that
        a compaction has moved: each chunk (``ids``, the chunk ids of the new version, and
        ``row_ids`` where they now are) keeps its vector, postings and columns under its new
        row id. ``None`` when the rows differ or this matrix does not know its chunks' ids.

        Rows masked out by patches (see ``alive``) stay, masked, under their old row ids
        until a patch makes a compact copy (a search never returns them, and should a live
        row come to have one of those ids, :meth:`vector_of` finds the live one). A compact
        copy here, beside this matrix, was the peak of a re-index at ~12k chunks (395-401 MB
        in process against 390-392 for the compaction before it; bench/README.md, "The
        in-memory copy relabelled in place")."""
        if self.columns is None or "id" not in self.columns.column_names:
            return None
        chunk_ids = self.columns.column("id")
        live = None if self.alive is None else np.flatnonzero(self.alive)
        if live is not None:
            chunk_ids = chunk_ids.take(pa.array(live))
        if len(ids) != len(chunk_ids):
            return None
        at = pc.index_in(chunk_ids, value_set=ids)
        if at.null_count:
            return None
        new_ids = np.asarray(row_ids, dtype=np.uint64)[at.to_numpy(zero_copy_only=False)]
        if live is None:
            moved = new_ids
        else:
            moved = self.row_ids.copy()
            moved[live] = new_ids
        order = np.argsort(moved, kind="stable")
        return VectorMatrix(version, moved, self.vectors, moved[order], order, self.terms,
                            self.names, self.columns, self.alive, self.room, self.appended_rows,
                            exact=self.exact)

    def nearest(self, query: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Positions (rows of ``vectors``) of the ``limit`` closest rows, closest first, and
        their exact cosines; ``row_ids[positions]`` are their row ids. Ties keep the earlier
        row: the same rows in the same order whatever rows a patch masked out or appended."""
        live = self.live_rows
        if live == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        return packed_vectors.nearest(self.vectors, self.dim, self.exact, query,
                                      min(limit, live), self._dead)

    def exact_vectors(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        """The float32 vectors of the rows at ``positions`` (copies: see ``pending_move``)."""
        at = np.asarray(positions, dtype=np.int64)
        return self.exact.read(slots(self.vectors[at], self.dim))

    def rows_at(self, positions: np.ndarray, terms: Sequence[str] = ()) -> list[dict] | None:
        """The kept columns of the rows at ``positions``, each with its ``_rowid`` (and its
        ``text`` if that was kept, else none: see ``ChunkStore.fill_text``); ``None`` when no
        columns were kept. Each row's ``terms``, unless kept, are those of ``terms`` (a
        search's words) it has, from the postings (see ``LivePostings.terms_at``)."""
        if self.columns is None:
            return None
        positions = np.asarray(positions, dtype=np.int64)
        pieces, starts = self._pieces
        if len(pieces) == 1:
            rows = pieces[0].take(pa.array(positions)).to_pylist()
        else:  # piece by piece: Arrow's take joins a column's pieces into one array first
            rows: list = [None] * len(positions)
            piece_of = np.searchsorted(starts, positions, side="right") - 1
            for piece in np.unique(piece_of).tolist():
                at = np.flatnonzero(piece_of == piece)
                taken = pieces[piece].take(pa.array(positions[at] - starts[piece]))
                for i, row in zip(at.tolist(), taken.to_pylist(), strict=True):
                    rows[i] = row
        for row, row_id in zip(rows, self.row_ids[positions].tolist(), strict=True):
            row["_rowid"] = row_id
        if "terms" not in self.columns.column_names and self.terms is not None:
            for row, held in zip(rows, self.terms.terms_at(positions, terms), strict=True):
                row["terms"] = held
        return rows

    @cached_property
    def _pieces(self) -> tuple[list[pa.RecordBatch], np.ndarray]:
        """The kept columns' pieces (one, or one more per patch that appended rows: see
        :meth:`patched`) and the first row of each."""
        assert self.columns is not None
        pieces = [b for b in self.columns.to_batches() if b.num_rows] or [
            pa.RecordBatch.from_pylist([], schema=self.columns.schema)]
        return pieces, np.cumsum([0] + [b.num_rows for b in pieces[:-1]])

    @cached_property
    def _dead(self) -> np.ndarray:
        """The rows masked out (see ``alive``)."""
        return np.flatnonzero(~self.alive) if self.alive is not None else np.empty(0, np.int64)

    def vector_of(self, row_id: int) -> np.ndarray | None:
        at = int(np.searchsorted(self.sorted_ids, row_id))
        while at < len(self.sorted_ids) and self.sorted_ids[at] == row_id:
            row = self.sorted_rows[at]
            if self.alive is None or self.alive[row]:
                return self.exact_vectors([row])[0]
            at += 1  # a row masked out (see patched)
        return None


class VectorCache:
    """Holds the newest loaded :class:`VectorMatrix`; reloads it in the background. ``load``
    returns ``None`` when there is nothing to hold (a large index, see
    ``rag_lsp.store.vector_index``)."""

    def __init__(self, load: Callable[[], VectorMatrix | None]):
        self._load = load
        self._matrix: VectorMatrix | None = None
        self._lock = threading.Lock()
        self._loading = False
        self._last_attempt = float("-inf")
        self._drops = 0  # a load that began before a drop must not bring its matrix back
        self._writing_from: int | None = None  # see writing()
        # Odd while a compaction in place moves rows (see VectorMatrix.pending_move), and
        # two more after each: see consistent().
        self._moves = 0

    def current(self, version: int) -> VectorMatrix | None:
        """The matrix if it is of ``version``, or older while this process's own write from
        its version is under way (see :meth:`writing`); else ``None``, and a reload is
        started unless the matrix is newer than ``version``."""
        matrix, writing_from = self._matrix, self._writing_from
        if matrix is not None and (matrix.version == version or (
                matrix.version == writing_from and writing_from < version)):
            return matrix
        if matrix is None or matrix.version < version:
            self._reload_soon()
        # else loaded since a read took its version (see ChunkStore.one_version): the read
        # asks LanceDB, and there is nothing newer to load
        return None

    @contextmanager
    def writing(self, version: int) -> Iterator[None]:
        """Around a write of this process to the table at ``version``, which ends by handing
        :meth:`patch` what it changed. Until then a search that finds the table newer still
        gets the matrix of ``version``, as if it had come just before the write, instead of
        asking LanceDB: such searches took ~64 ms at the median against ~17 (12k chunks, an
        index run; bench/README.md, "The in-memory copy patched after its own writes")."""
        with self._lock:
            matrix = self._matrix
            # Only a matrix holding the text answers alone: one without would have searches
            # read the text of rows the write may be deleting (see ChunkStore.fill_text).
            whole = matrix is not None and matrix.holds_text
            self._writing_from = version if whole and matrix.version == version else None
        try:
            yield
        finally:
            with self._lock:
                self._writing_from = None

    def consistent(self, read: Callable[[], T]) -> T:
        """``read()``, which reads the matrix (and may find it: see :meth:`current`), again
        until no compaction in place has moved rows under it (see
        :meth:`VectorMatrix.settled`): a search that starts during a move waits for its end,
        and one that overlapped a move never keeps what it read. No lock is taken: the
        writer never waits for searches. Anything ``read`` returns of the vectors must be a
        copy."""
        while True:
            moves = self._moves
            if moves % 2:  # a move under way: 10-25 ms at 12k-24k chunks
                time.sleep(0.002)
                continue
            result = read()
            if self._moves == moves:
                return result

    def patch(self, before: int, patched: Callable[[VectorMatrix], VectorMatrix | None]) -> None:
        """Swap in ``patched(matrix)``, the matrix brought from table version ``before`` to
        the current one by this process's own write (see :meth:`VectorMatrix.patched`), if
        the matrix held is of ``before``, with its pending move done (reads under way retry:
        see :meth:`consistent`). Otherwise, or if that fails, the next search finds the
        matrix stale and a reload starts."""
        matrix = self._matrix
        if matrix is None or matrix.version != before:
            return
        try:
            new = patched(matrix)
        except ProcessEnding:
            return
        except Exception as exc:  # a reload will catch up
            log.debug("could not patch the vectors in memory: %s", exc)
            return
        with self._lock:
            if new is None or self._matrix is not matrix:  # dropped or reloaded meanwhile
                return
            if new.pending_move is None:
                self._matrix = new
                return
            self._moves += 1
            try:
                self._matrix = new.settled()
            except BaseException as exc:  # rows half moved (out of memory, an interrupt)
                log.debug("could not compact the vectors in memory: %r", exc)
                self._matrix = None  # searches ask LanceDB until a reload
                if not isinstance(exc, Exception):
                    raise
            finally:
                self._moves += 1

    def settle(self, version: int, text_bytes: int) -> bool:
        """Once this process's writes have settled (a run's end, a burst of saves compacted):
        the matrix of table ``version`` the patches left swapped for one compact copy of it
        (see :meth:`VectorMatrix.compacted_copy`), as :meth:`patch` swaps a patch in, if they
        left at least ``SETTLE_SHARE_MIN`` of its live rows' worth to score (a save or two
        leave less: not worth a copy of it all, which holds up to ~40 MB more for a moment at
        12k chunks). Whether it was."""
        matrix = self._matrix
        if matrix is None or matrix.version != version or matrix.unsettled_share < SETTLE_SHARE_MIN:
            return False
        # Only that matrix: a reload of the same version may have come meanwhile.
        self.patch(version, lambda held: held.compacted_copy(text_bytes)
                   if held is matrix else None)
        settled = self._matrix
        if settled is None or settled is matrix or settled.version != version:
            return False  # failed, dropped or reloaded meanwhile (a reload catches up)
        return_freed_memory()  # the patched copy's pages, unless a search still reads it
        return True

    def _reload_soon(self) -> None:
        with self._lock:
            now = time.monotonic()
            if self._loading or now - self._last_attempt < RELOAD_INTERVAL_SECONDS:
                return
            self._loading, self._last_attempt = True, now
        # Not a daemon: the process waits for a load under way before it ends (a load reading
        # through while_process_runs stops at its next batch). A daemon thread still inside
        # LanceDB's native reader while the interpreter finalised aborted the process
        # (SIGABRT) now and then when a client exited right after the warm-up.
        threading.Thread(target=self._reload, name="rag-vectors").start()

    def _reload(self) -> None:
        run_in_background()  # a load (~0.3 s of CPU at 12k chunks) must not slow searches
        drops = self._drops
        try:
            matrix = self._load()
            with self._lock:
                held = self._matrix
                # Not over a patch of a newer version (see patch) that came first.
                if drops == self._drops and (matrix is None or held is None
                                             or held.version <= matrix.version):
                    self._matrix = matrix
        except ProcessEnding:
            pass
        except Exception as exc:  # the LanceDB search path keeps working without it
            log.debug("could not load the vectors into memory: %s", exc)
        finally:
            with self._lock:
                self._loading = False
            return_freed_memory()

    def holds_copy(self) -> bool:
        """Whether a copy is held (of any version)."""
        return self._matrix is not None

    def drop(self) -> None:
        with self._lock:
            self._drops += 1
            self._matrix = None
