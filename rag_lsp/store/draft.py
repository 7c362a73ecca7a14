"""A provisional word index of files whose text the index does not have yet.

The model embeds 20-50 chunks a second on two cores, so a first index of 1,000 files takes
many minutes, and a file was not searchable at all until its chunks were embedded and written.
Before embedding, the indexer now reads each new file once and adds it here as plain windows of
lines with their terms and the names they define: no tokenizer and no model (7-8 s for 10 MB
on a 2-core VM, reading and redacting secrets included). Searches take candidates from here
beside the real index (word evidence only, no cosine: a drafted window ranks below an embedded
chunk that matches as well).

A saved file is drafted too, as soon as its event arrives: its update may wait behind a
compaction of the folder's one writer (27-38 s at 100k chunks when the ANN index is trained
again). While drafted, a file's stored chunks are of its old text, and a search that reads the
draft takes the drafted windows instead (a deleted file is drafted empty: nothing of it). A
changed file (saved, or found by a run) is drafted with its stored chunks (``add``'s
``stored``): those whose text it still holds, whole lines, stay searchable with their vectors,
moved to the lines they are at now (``DraftView.moved_row``; rag_lsp.store.stored_places), and
only the lines none of them covers are drafted as windows. Without that, a saved file answered
by its words alone until its update landed: with each question's files saved with one blank
line more (no word changed) and drafted, five benchmark repositories scored NDCG@10 0.566
against 0.910 with nothing saved; 0.909 with the stored chunks kept (bench/README.md,
"saved_rankings.py").

An entry goes when the index has caught up with it: its file's real chunks written, or the
update or run that read the file after it was drafted ended (``mark`` and ``drafted_before``:
a file saved again meanwhile keeps its newer entry).

It lives in the memory of the process that indexes: another process reading the same index
sees files as their real chunks land.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rag_lsp.chunking.definitions import defined_names
from rag_lsp.store.stored_places import StoredPlaces, unchanged_chunks
from rag_lsp.terms import path_terms, text_terms

WINDOW_LINES = 40
# Text held at most: a monorepo's first index drafts its first 32 MB of new files (about 3,000
# files of 10 kB; the draft then holds ~90 MB: 27 MB per 10 MB of text), the rest becomes
# searchable as it is embedded.
MAX_BYTES = 32 << 20
# Windows held at most when the term lists are built again without the discarded ones (4.8 ms
# of the lock for 375 windows of rag-lsp's own sources, ~110 terms each: ~13 ms for 1,000).
PRUNE_MAX_WINDOWS = 1000
# What a drafted window is, for filters and for result kinds (the chunker's plain windows).
DRAFT_KIND = "text"
_ID_PREFIX = "draft:"


def is_drafted(row: dict) -> bool:
    """Whether a search candidate's row is a drafted window (not a stored chunk)."""
    return row["id"].startswith(_ID_PREFIX)


@dataclass(frozen=True)
class _Window:
    path: str
    language: str
    start_line: int
    end_line: int
    text: str
    terms: str  # space-separated, as the index stores them (a set per window cost 5x more)
    defines: str

    def row(self, terms: str) -> dict:
        """The window as a search reads a stored chunk (see ``RESULT_COLUMNS``), with
        ``terms`` (space-separated) for its terms: those of the search's it holds."""
        return {"id": f"{_ID_PREFIX}{self.path}:{self.start_line}", "path": self.path,
                "start_line": self.start_line, "end_line": self.end_line,
                "language": self.language, "kind": DRAFT_KIND, "symbol": "",
                "text": self.text, "defines": self.defines, "terms": terms}


def is_gone(path: str, gone: frozenset[str]) -> bool:
    """Whether ``path`` or a folder above it is in ``gone`` (a deleted file, or a file under a
    deleted folder, which no event may name): one set lookup a level, however many paths a
    branch switch deleted."""
    end = len(path)
    while end > 0:
        if path[:end] in gone:
            return True
        end = path.rfind("/", 0, end)
    return False


def _window_spans(line_count: int, covered: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The drafted windows of a file of ``line_count`` lines, as 0-based ``(start, stop)``
    line slices: runs of the lines no ``covered`` (1-based, inclusive) span holds, cut every
    :data:`WINDOW_LINES` lines from each run's start. Nothing covered: every
    :data:`WINDOW_LINES` lines from the top."""
    free = bytearray(b"\x01") * line_count
    for first, last in covered:
        low, high = max(first - 1, 0), min(last, line_count)
        if low < high:
            free[low:high] = bytes(high - low)
    spans = []
    line = 0
    while line < line_count:
        if not free[line]:
            line += 1
            continue
        stop = line
        while stop < line_count and free[stop] and stop - line < WINDOW_LINES:
            stop += 1
        spans.append((line, stop))
        line = stop
    return spans


@dataclass(frozen=True)
class DraftView:
    """What one search takes of the draft, all of one moment: the files held, those gone,
    and where their stored chunks are now."""

    paths: frozenset[str]
    gone: frozenset[str]
    moved: dict[str, StoredPlaces]

    def moved_row(self, row: dict) -> dict | None:
        """A stored chunk's row (``id``, ``path``, lines) as a search shows it: a file not
        drafted, as it is; a drafted file's chunk whose text the file still holds, at the lines
        that text is at now; any other, ``None`` (the file's drafted windows hold what it
        became)."""
        if row["path"] not in self.paths:
            return row
        places = self.moved.get(row["path"])
        place = places.place(row) if places is not None else None
        if place is None:
            return None
        return {**row, "start_line": place[0], "end_line": place[1]}


class DraftIndex:
    """Files by their words until their real chunks are written. Thread-safe: the indexer
    adds and discards while searches read."""

    def __init__(self, max_bytes: int = MAX_BYTES):
        self._lock = threading.Lock()
        self._max_bytes = max_bytes
        self._bytes = 0
        self._windows: dict[int, _Window] = {}
        self._by_path: dict[str, list[int]] = {}
        self._size: dict[str, int] = {}
        # term -> windows holding it. Lists, appended to: a discarded window's id stays, and is
        # skipped when read, until the lists are built again from the windows held, once those
        # are fewer than the windows dropped and few enough to take little time under the lock
        # (a save's draft comes and goes while a long first index holds the rest). A set per
        # term held about 40 bytes per entry, and a draft has a million entries per 10 MB of
        # text.
        self._postings: dict[str, list[int]] = {}
        self._dropped = 0  # windows discarded since the lists were built
        self._next_id = 0
        # When each file was drafted, on a clock of adds (see mark); which were saved files.
        self._drafted_at: dict[str, int] = {}
        self._clock = 0
        self._saved: set[str] = set()
        self._gone: set[str] = set()  # saved paths that no longer exist (files or folders)
        # Where a drafted file's stored chunks are now, by path (the files drafted with them).
        self._moved: dict[str, StoredPlaces] = {}

    def __len__(self) -> int:
        """Files held."""
        return len(self._by_path)

    def new_files(self) -> int:
        """Files held that a run drafted (new files its model has not read), not saved ones."""
        with self._lock:
            return len(self._by_path) - len(self._saved)

    def paths(self) -> frozenset[str]:
        """The files held: a search takes their drafted windows, not their stored chunks."""
        with self._lock:
            return frozenset(self._by_path)

    def holds(self, path: str) -> bool:
        """Whether ``path`` is drafted (a search takes its windows, not its stored chunks)."""
        with self._lock:
            return path in self._by_path

    def mark(self) -> int:
        """Now, on the clock of adds: an entry added later is newer than what a reader of the
        file after this call has read (see :meth:`discard`)."""
        with self._lock:
            return self._clock

    def add(self, path: str, text: str, language: str, *, saved: bool = False,
            gone: bool = False, stored: Iterable[dict] = ()) -> bool:
        """Hold ``path``'s text (already redacted as indexing would) in place of what it held;
        ``""`` for a file that will not be indexed; ``saved``: a changed file ahead of its
        update, not a new file of a run; ``gone``: the path no longer exists (a file or a
        folder); ``stored``: the file's chunks in the index (rows of ``STORED_COLUMNS``),
        of which those it still holds stay searchable (:meth:`DraftView.moved_row`) and only
        the rest of its lines is drafted (see also :meth:`keep_stored`). False when full (and
        ``path`` is no longer held)."""
        return self.add_entry(path, text, language, saved=saved, gone=gone,
                              stored=stored) is not None

    def add_entry(self, path: str, text: str, language: str, *, saved: bool = False,
                  gone: bool = False, stored: Iterable[dict] = ()) -> int | None:
        """:meth:`add`, saying which entry it made (its time on the clock of adds, for
        :meth:`keep_stored`), or ``None`` when full."""
        if self._bytes - self._size.get(path, 0) + len(text) > self._max_bytes:
            self.discard([path])  # what it held is older than the file
            return None
        windows, places = self._drafted(path, text, language, () if gone else stored)
        with self._lock:
            self._discard(path)
            self._hold(path, windows, places)
            self._size[path] = len(text)
            self._bytes += len(text)
            stamp = self._drafted_at[path] = self._clock
            self._clock += 1
            if saved:
                self._saved.add(path)
            if gone:
                self._gone.add(path)
            self._prune_postings()
        return stamp

    def keep_stored(self, path: str, text: str, language: str, stored: Iterable[dict],
                    stamp: int) -> bool:
        """Draft ``path`` again with its stored chunks (as :meth:`add`'s ``stored``), if it
        still holds the entry ``stamp`` (see :meth:`add_entry`) that ``text`` made: a save is
        drafted by its words first, at once, and narrowed to what changed once its stored
        chunks are read (a read that waits behind a compaction at 100k chunks). Whether it
        did."""
        windows, places = self._drafted(path, text, language, stored)
        with self._lock:
            if self._drafted_at.get(path) != stamp or path in self._gone:
                return False  # drafted again, or discarded meanwhile; (deleted: nothing to keep)
            self._drop_windows(path)
            self._hold(path, windows, places)
            self._prune_postings()
        return True

    @staticmethod
    def _drafted(path: str, text: str, language: str, stored: Iterable[dict]
                 ) -> tuple[list[tuple[set[str], _Window]], StoredPlaces | None]:
        """``path``'s windows, with their terms, and where its ``stored`` chunks are now (none
        kept: ``None``)."""
        lines = text.split("\n")  # as editors and the chunkers count lines (not at \f, \r)
        if lines and not lines[-1]:
            lines.pop()  # the final newline ends the last line, it does not start one
        stored = list(stored)
        kept = unchanged_chunks(lines, stored) if lines and stored else {}
        windows = []
        for start, stop in _window_spans(len(lines), kept.values()):
            body = "\n".join(lines[start:stop])
            if body.strip():
                terms = text_terms(body) | path_terms(path)
                windows.append((terms, _Window(
                    path, language, start + 1, stop, body,
                    " ".join(terms), " ".join(defined_names(body, language)))))
        return windows, StoredPlaces.of(stored, kept) if kept else None

    def _hold(self, path: str, windows: list[tuple[set[str], _Window]],
              places: StoredPlaces | None) -> None:
        """Hold ``path``'s windows and its stored chunks' places (under the lock)."""
        ids = self._by_path[path] = []
        for terms, window in windows:
            ids.append(self._next_id)
            self._windows[self._next_id] = window
            for term in terms:
                self._postings.setdefault(term, []).append(self._next_id)
            self._next_id += 1
        if places is not None:
            self._moved[path] = places

    def view(self) -> DraftView:
        """What a search takes of the draft (see :class:`DraftView`)."""
        with self._lock:
            return DraftView(frozenset(self._by_path), frozenset(self._gone), dict(self._moved))

    def kept_chunks(self, path: str) -> int:
        """How many of ``path``'s stored chunks its draft keeps (see :meth:`add`)."""
        with self._lock:
            places = self._moved.get(path)
            return places.kept() if places is not None else 0

    def discard(self, paths: Iterable[str] | None = None, *,
                drafted_before: int | None = None) -> None:
        """Drop these files (every file: ``None``), or only those drafted before the
        ``drafted_before`` mark (the index has read them since)."""
        with self._lock:
            for path in list(self._by_path) if paths is None else paths:
                if drafted_before is None or self._drafted_at.get(path, 0) < drafted_before:
                    self._discard(path)
            self._prune_postings()

    def _discard(self, path: str) -> None:
        self._bytes -= self._size.pop(path, 0)
        self._drafted_at.pop(path, None)
        self._saved.discard(path)
        self._gone.discard(path)
        self._drop_windows(path)

    def _drop_windows(self, path: str) -> None:
        """Let go of ``path``'s windows and stored places (under the lock)."""
        self._moved.pop(path, None)
        for window_id in self._by_path.pop(path, ()):
            del self._windows[window_id]
            self._dropped += 1

    def _prune_postings(self) -> None:
        """Build the term lists again without the discarded windows' ids (under the lock)."""
        if self._dropped <= len(self._windows) or len(self._windows) > PRUNE_MAX_WINDOWS:
            return
        self._postings = {}
        for window_id, window in self._windows.items():  # (ids ascending, as appended)
            for term in window.terms.split():
                self._postings.setdefault(term, []).append(window_id)
        self._dropped = 0

    def search(self, terms: Sequence[str], identifiers: Sequence[str], limit: int,
               accept: Callable[[dict], bool] | None = None) -> list[dict]:
        """Up to ``limit`` windows holding the most of ``terms`` (rarer ones weighing more)
        or defining one of ``identifiers``, best first, as rows; ``accept`` filters them.
        A row's ``terms`` are only those of ``terms`` its window holds: all a search asks of
        them, as of a row from the in-memory copy (a window holds ~110, and each search
        looked for its own among them again)."""
        with self._lock:
            total = len(self._windows)
            if not total:
                return []
            scores: dict[int, float] = {}
            held: dict[int, list[str]] = {}  # window -> the searched terms it holds
            for term in dict.fromkeys(terms):
                live = self._postings.get(term, ())
                if self._dropped:  # (the lists may still name windows discarded since)
                    live = [w for w in live if w in self._windows]
                weight = math.log((total + 1) / (len(live) + 0.5))
                for window_id in live:
                    scores[window_id] = scores.get(window_id, 0.0) + weight
                    held.setdefault(window_id, []).append(term)
            if identifiers:
                wanted = {i.lower() for i in identifiers}
                for window_id in {w for t in text_terms(" ".join(identifiers))
                                  for w in self._postings.get(t, ()) if w in self._windows}:
                    names = self._windows[window_id].defines.lower().split()
                    if wanted & set(names):
                        scores[window_id] = scores.get(window_id, 0.0) + math.log(total + 1)
            ranked = sorted(scores, key=lambda i: (-scores[i], i))
            rows = []
            for window_id in ranked:
                row = self._windows[window_id].row(" ".join(held.get(window_id, ())))
                if accept is None or accept(row):
                    rows.append(row)
                    if len(rows) == limit:
                        break
            return rows
