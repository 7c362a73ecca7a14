"""Full-text lookups from memory: BM25 over the terms each chunk already stores.

LanceDB's full-text index costs 6-10 ms a lookup at 12k chunks on two cores (two lookups a
search, queued on LanceDB's one event loop), a third of a search. Every chunk row already
carries its analysed terms (``terms``: stemmed, stop words out, identifiers split, see
``rag_lsp.terms``) and the names it defines (``defines``), so the postings are built from
those columns in the same background scan that loads the vector matrix, for the same table
version. Measured on the code benchmark and SciFact, ranking by these terms is as good as
LanceDB's own tokenizer and counts (bench/README.md, "Where a search's time goes").

Scoring is BM25 (k1 1.2, b 0.75). The stored terms are distinct, so a term counts once per
chunk and a chunk's length is its number of distinct terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

K1 = 1.2
B = 0.75
# Distinct terms a column's postings may have (~150 bytes each in the vocabulary): real code
# has tens of thousands (19k in 100k chunks of Python; 3k in 12k generated chunks).
MAX_TERMS = 500_000
# A posting while postings are built: (term id << _ROW_BITS) + row, so that one sort orders
# them by term, then row.
_ROW_BITS = 32
_ROW_MASK = (1 << _ROW_BITS) - 1
_FINISH_BLOCK = 1 << 20


def best_first(scores: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows with a score, best first (at most ``limit``; ties: the earlier row), and
    their scores."""
    found = np.flatnonzero(scores)
    found = found[np.lexsort((found, -scores[found]))][:max(limit, 0)]
    return found, scores[found]


@dataclass(frozen=True)
class TermIndex:
    """Postings of one column: for each term, the rows (positions in the column) that have
    it, stored as one array sorted by term (``starts[t]`` to ``starts[t + 1]``)."""

    vocabulary: dict[str, int]
    starts: np.ndarray  # int64, one per term + 1
    rows: np.ndarray  # int32, the rows of each term in turn
    lengths: np.ndarray  # float32 per row: its distinct terms
    length_norm: np.ndarray  # float32 per row: K1 * (1 - B + B * length / mean length)

    @classmethod
    def of(cls, vocabulary: dict[str, int], starts: np.ndarray, rows: np.ndarray,
           lengths: np.ndarray) -> TermIndex:
        mean = float(lengths.mean()) if len(lengths) and lengths.mean() > 0 else 1.0
        return cls(vocabulary, starts, rows, lengths,
                   (K1 * (1 - B + B * lengths / mean)).astype(np.float32))

    @classmethod
    def build(cls, column: pa.ChunkedArray | pa.Array, *, lower: bool = False) -> TermIndex:
        """From a string column of space-separated terms, one row per chunk (nulls are
        empty)."""
        builder = TermIndexBuilder(lower=lower)
        for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
            builder.add(chunk)
        return builder.finish()

    def __len__(self) -> int:
        return len(self.length_norm)

    def patched(self, keep: np.ndarray, added: TermIndex) -> TermIndex:
        """This index's rows where ``keep`` (bool per row) is true, renumbered in order, then
        ``added``'s rows after them, built by a :class:`TermIndexBuilder` extending this
        index. The postings are merged term by term without re-reading any words: after a
        write touched a few files, the rest need not be split and counted again. (Terms whose
        rows are all gone stay in the vocabulary with none; a full load drops them.)

        Four passes over the postings: which are kept, the kept ones (renumbered), and one
        insertion of the added ones after each term's kept ones. The few postings removed
        give the counts (12k rows of 45 words: ~4 ms against ~10.5 for the dozen passes of
        a term id per posting)."""
        terms = len(added.vocabulary)
        still = keep[self.rows]
        gone = np.flatnonzero(~still)
        # The term of each removed posting: the block of ``starts`` it falls in.
        gone_terms = np.searchsorted(self.starts, gone, side="right") - 1
        kept_counts = np.zeros(terms, dtype=np.int64)
        kept_counts[:len(self.starts) - 1] = np.diff(self.starts)
        kept_counts -= np.bincount(gone_terms, minlength=terms)
        kept = self.rows[still] if len(gone) else self.rows
        if not keep.all():
            kept = (np.cumsum(keep, dtype=np.int32) - 1)[kept]
        added_counts = np.diff(added.starts)
        starts = np.zeros(terms + 1, dtype=np.int64)
        np.cumsum(kept_counts + added_counts, out=starts[1:])
        # Each added posting goes after its term's kept ones (np.insert keeps the order of
        # those given the same place: the added rows of a term stay in order).
        kept_ends = np.cumsum(kept_counts)
        added_terms = np.repeat(np.arange(terms, dtype=np.int64), added_counts)
        rows = np.insert(kept, kept_ends[added_terms],
                         added.rows + np.int32(np.count_nonzero(keep)))
        lengths = np.concatenate([self.lengths[keep], added.lengths])
        return TermIndex.of(added.vocabulary, starts, rows, lengths)

    def has(self, term: str, rows: np.ndarray) -> np.ndarray:
        """Whether each of ``rows`` has ``term`` (bool per row): a term's rows are in order,
        so a binary search each."""
        at = self.vocabulary.get(term)
        holding = (self.rows[self.starts[at]:self.starts[at + 1]]
                   if at is not None and at + 1 < len(self.starts) else self.rows[:0])
        if not len(holding):
            return np.zeros(len(rows), dtype=bool)
        found = np.minimum(np.searchsorted(holding, rows), len(holding) - 1)
        return holding[found] == rows

    def search(self, terms: Sequence[str], limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows having any of ``terms``, best first (at most ``limit``), and their scores."""
        scores = np.zeros(len(self), dtype=np.float32)
        for term in dict.fromkeys(terms):
            at = self.vocabulary.get(term)
            if at is None:
                continue
            rows = self.rows[self.starts[at]:self.starts[at + 1]]
            idf = math.log(1 + (len(self) - len(rows) + 0.5) / (len(rows) + 0.5))
            scores[rows] += idf * (K1 + 1) / (1 + self.length_norm[rows])
        return best_first(scores, limit)


@dataclass(frozen=True)
class LivePostings:
    """The postings a search uses: those of a load (``base``) and those of the rows this
    process's writes have added since (``added``, numbered after the base's rows; ``None``:
    none), with the rows those writes have removed masked out (``alive``, one per row of
    both; ``None``: all alive). A patch of a few files rebuilds only ``added``, and a search
    answers exactly as postings built from scratch of the live rows would (counts, lengths
    and the mean length over the live rows only; ties keep the earlier row): see
    ``VectorMatrix.patched``."""

    base: TermIndex
    added: TermIndex | None
    alive: np.ndarray | None
    length_norm: np.ndarray  # float32 per row of both, from the live rows' mean length
    live: int

    @classmethod
    def of(cls, base: TermIndex, added: TermIndex | None = None,
           alive: np.ndarray | None = None) -> LivePostings:
        if added is None and alive is None:
            return cls(base, None, None, base.length_norm, len(base))
        lengths = base.lengths if added is None else np.concatenate([base.lengths,
                                                                     added.lengths])
        live = lengths if alive is None else lengths[alive]
        # As TermIndex.of computes it for the live rows alone (same values, same order).
        mean = float(live.mean()) if len(live) and live.mean() > 0 else 1.0
        return cls(base, added, alive, (K1 * (1 - B + B * lengths / mean)).astype(np.float32),
                   len(live))

    @property
    def vocabulary(self) -> dict[str, int]:
        """The newest numbering of terms (rows to add extend it: see TermIndexBuilder)."""
        return self.base.vocabulary if self.added is None else self.added.vocabulary

    def __len__(self) -> int:
        return self.live

    def appended(self, alive: np.ndarray, rows: TermIndex) -> LivePostings:
        """These postings with ``rows`` (built extending them) after the last row, and only
        the rows ``alive`` marks (one per row, the new ones included) still live."""
        if self.added is None:
            return LivePostings.of(self.base, rows, alive)
        everything = np.ones(len(self.added), dtype=bool)
        return LivePostings.of(self.base, self.added.patched(everything, rows), alive)

    def compacted(self, keep: np.ndarray, rows: TermIndex) -> LivePostings:
        """One index of the rows ``keep`` marks (one per row of both), renumbered in order,
        then ``rows`` (built extending these postings)."""
        cut = len(self.base)
        tail = rows if self.added is None else self.added.patched(keep[cut:], rows)
        return LivePostings.of(self.base.patched(keep[:cut], tail))

    def terms_at(self, rows: np.ndarray, terms: Sequence[str]) -> list[str]:
        """For each of ``rows`` (live ones), those of ``terms`` it has, space-separated, in
        the order of ``terms``: a row's stored terms and its path's words, as the postings
        hold them. All a search asks of a row's words is which of its query's it has (see
        ``Candidate.keep_terms``), so the in-memory copy keeps no column of each row's own
        (14 MB at 47.5k chunks)."""
        rows = np.asarray(rows, dtype=np.int64)
        cut = len(self.base)
        in_base = rows < cut
        has = np.zeros((len(terms), len(rows)), dtype=bool)
        for i, term in enumerate(terms):
            has[i, in_base] = self.base.has(term, rows[in_base])
            if self.added is not None and not in_base.all():
                has[i, ~in_base] = self.added.has(term, rows[~in_base] - cut)
        return [" ".join(t for t, held in zip(terms, column, strict=True) if held)
                for column in has.T.tolist()]

    def search(self, terms: Sequence[str], limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Live rows having any of ``terms``, best first (at most ``limit``), and their
        scores (see :meth:`TermIndex.search`)."""
        if self.added is None and self.alive is None:
            return self.base.search(terms, limit)
        cut = len(self.base)
        parts_of = [(self.base, 0)] + ([(self.added, cut)] if self.added is not None else [])
        scores = np.zeros(len(self.length_norm), dtype=np.float32)
        for term in dict.fromkeys(terms):
            parts = []
            for index, offset in parts_of:
                at = index.vocabulary.get(term)
                if at is not None and at + 1 < len(index.starts):
                    parts.append(index.rows[index.starts[at]:index.starts[at + 1]] + offset)
            rows = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
            if self.alive is not None:
                rows = rows[self.alive[rows]]
            if not len(rows):
                continue
            idf = math.log(1 + (self.live - len(rows) + 0.5) / (len(rows) + 0.5))
            scores[rows] += idf * (K1 + 1) / (1 + self.length_norm[rows])
        return best_first(scores, limit)


class _Keys:
    """int64 keys appended batch by batch into one array, so that sorting them all needs no
    second copy (joining the batches' arrays at the end held every key twice for a moment:
    ~30 MB more at 47.5k chunks, then the peak of the in-memory copy's load; bench/README.md,
    "The copy's load in pages"). The array is made with room to spare: 1.5 times the first
    batch's keys a row times the rows expected. Room never written costs no memory (a large
    array is a mapping of its own, whose pages become resident when first written). Past
    it, a new array of twice the size."""

    def __init__(self, expected_rows: int):
        self._expected_rows = expected_rows
        self._array = np.empty(0, dtype=np.int64)
        self.count = 0

    def append(self, keys: np.ndarray, rows: int) -> None:
        """Append ``keys``, those of ``rows`` rows."""
        needed = self.count + len(keys)
        if needed > len(self._array):
            per_row = len(keys) / max(rows, 1)
            room = max(2 * needed, int(1.5 * per_row * self._expected_rows))
            grown = np.empty(room, dtype=np.int64)
            grown[:self.count] = self._array[:self.count]
            self._array = grown
        self._array[self.count:needed] = keys
        self.count = needed

    def taken(self) -> np.ndarray:
        """The keys so far (a view: this object keeps nothing after)."""
        keys, self._array = self._array[:self.count], np.empty(0, dtype=np.int64)
        self.count = 0
        return keys


class TermIndexBuilder:
    """Builds a :class:`TermIndex` one batch of rows at a time: splitting and counting happen
    in Arrow and NumPy, not in a Python loop over terms, and only one batch's words are held
    as strings at a time (at 50k chunks a column holds millions of (chunk, term) pairs)."""

    def __init__(self, *, lower: bool = False, max_terms: int = MAX_TERMS,
                 extending: TermIndex | LivePostings | None = None, expected_rows: int = 0):
        """``extending``: rows to be added to that index (see :meth:`TermIndex.patched`),
        so their terms are numbered as in it (its vocabulary is copied, not changed).
        ``expected_rows``: about how many rows will come (0: unknown)."""
        self._lower = lower
        self._max_terms = max_terms
        self._vocabulary: dict[str, int] = (dict(extending.vocabulary)
                                             if extending is not None else {})
        # One posting a key: its term id in the high 32 bits, its row in the low.
        self._postings = _Keys(expected_rows)
        self._lengths: list[np.ndarray] = []  # per batch: distinct terms of each row
        self._rows = 0

    def add(self, column: pa.Array, extra: pa.Array | None = None) -> None:
        """Rows of ``column`` (space-separated terms), each with the terms of ``extra`` (same
        length) too. A term counts once per row. Nothing more is kept once the vocabulary
        has overflowed (the postings will not be used)."""
        if self.overflowed:
            return
        column = pc.fill_null(column.cast(pa.string()), "")
        if extra is not None:
            column = pc.binary_join_element_wise(column, pc.fill_null(extra, ""), " ")
        if self._lower:
            column = pc.utf8_lower(column)
        lists = pc.split_pattern(column, " ")
        words = pc.list_flatten(lists)
        keep = pc.not_equal(words, "")
        owners = pc.list_parent_indices(lists).filter(keep).to_numpy().astype(np.int32)
        encoded = pc.dictionary_encode(words.filter(keep))
        local = encoded.dictionary.to_pylist()
        vocabulary = self._vocabulary
        to_global = np.fromiter((vocabulary.setdefault(w, len(vocabulary)) for w in local),
                                dtype=np.int32, count=len(local))
        terms = to_global[encoded.indices.to_numpy()]
        # Once per row: lower-casing and added terms can repeat a term within a row. (A sort
        # and a comparison: numpy 2.4's np.unique took 20 times as long, half of a load.)
        keys = np.sort((terms.astype(np.int64) << _ROW_BITS) + owners + self._rows)
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))[:len(keys)]]
        self._postings.append(keys, len(column))
        self._lengths.append(np.bincount((keys & _ROW_MASK) - self._rows,
                                         minlength=len(column)))
        self._rows += len(column)

    @property
    def overflowed(self) -> bool:
        """More distinct terms than ``max_terms`` (generated code, hashes, data): the
        vocabulary alone would take too much memory, so the caller keeps asking LanceDB."""
        return len(self._vocabulary) > self._max_terms

    def finish(self) -> TermIndex:
        """The postings, each term's rows in order. One sort of the keys in place: a stable
        argsort of the term ids (int64 indexes, its buffer, the rows gathered) held ~80 MB
        more for a moment at 48k chunks, the peak of the in-memory copy's load."""
        postings = self._postings.taken()
        lengths = (np.concatenate(self._lengths).astype(np.float32) if self._lengths
                   else np.empty(0, np.float32))
        self._lengths = []
        postings.sort()  # by term, then row
        first_keys = np.arange(len(self._vocabulary) + 1, dtype=np.int64) << _ROW_BITS
        starts = np.searchsorted(postings, first_keys).astype(np.int64)
        rows = np.empty(len(postings), dtype=np.int32)
        for at in range(0, len(postings), _FINISH_BLOCK):  # no int64 temporary of them all
            rows[at:at + _FINISH_BLOCK] = postings[at:at + _FINISH_BLOCK] & _ROW_MASK
        return TermIndex.of(self._vocabulary, starts, rows, lengths)
