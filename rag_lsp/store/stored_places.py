"""Where a changed file's stored chunks are in its new text (see rag_lsp.store.draft).

A file saved, or changed under a run, is drafted until its update lands; its stored chunks
are of its old text. Those whose text it still holds as whole lines are as good as new: the
draft keeps them, at the lines that text is at now, and drafts only the rest of the file.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rag_lsp.errors import RagLspError
from rag_lsp.store.chunk_ids import content_key

log = logging.getLogger(__name__)

# What a draft reads of a file's stored chunks.
STORED_COLUMNS = ["id", "path", "start_line", "end_line", "kind", "symbol", "text"]
# Places of a stored chunk's text tried, at most, nearest where it was first.
PLACES_TRIED = 16


def read_stored(read: Callable[[], dict[str, list[dict]]]) -> dict[str, list[dict]]:
    """``read()``: changed files' stored chunks, by path. None when the index cannot be read
    now: their drafts then hold their words alone, and the fault is left for a search, or the
    run, to meet and report."""
    try:
        return read()
    except (RagLspError, OSError, RuntimeError, ValueError) as exc:
        log.debug("stored chunks of changed files not read: %s", exc)
        return {}


def unchanged_chunks(lines: Sequence[str], stored: Iterable[dict]) -> dict[str, tuple[int, int]]:
    """Of a file's stored chunks (rows of :data:`STORED_COLUMNS`), those whose text the file's
    ``lines`` (its text now, split at line feeds) still hold as whole lines, by id: their
    first and last line now. A text found in several places is put at the one nearest its
    old first line that no chunk nearer took. A piece of a line too long for the model is not
    whole lines (its line is drafted). The pieces of a definition too long for one chunk are
    kept only while its signature line is in the file (see :func:`_stale_pieces`)."""
    at_line: dict[str, list[int]] = {}
    for number, line in enumerate(lines):
        at_line.setdefault(line, []).append(number)
    rows = list(stored)
    found = []  # (how far it moved, which chunk, the place its text is at now)
    for index, row in enumerate(rows):
        body = (row.get("text") or "").split("\n")
        if "".join(body).strip():
            found.extend((abs(first + 1 - row["start_line"]), index, (first + 1, first + len(body)))
                         for first in _nearest_places(lines, at_line, body, row["start_line"] - 1))
    kept: dict[str, tuple[int, int]] = {}
    taken: set[tuple[int, int]] = set()  # two copies of a text kept are two places, not one
    for _distance, index, place in sorted(found):  # the nearest first
        if place not in taken and rows[index]["id"] not in kept:
            kept[rows[index]["id"]] = place
            taken.add(place)
    for chunk_id in _stale_pieces(rows, at_line):
        kept.pop(chunk_id, None)
    return kept


def _nearest_places(lines: Sequence[str], at_line: dict[str, list[int]], body: list[str],
                    old: int) -> list[int]:
    """The first lines (0-based) of the places nearest ``old`` where ``lines`` hold ``body``:
    the two nearest of the :data:`PLACES_TRIED` nearest where its rarest line is. Found
    through that line, and no further: a file of lines repeated all over (a JSON fixture)
    took 23 s a megabyte when every place of a body's first line was tried."""
    anchor = min(range(len(body)), key=lambda i: len(at_line.get(body[i], ())))
    at = at_line.get(body[anchor], [])
    starts = [n - anchor for n in at if n >= anchor]
    middle = bisect_left(starts, old)
    tried = sorted(starts[max(0, middle - PLACES_TRIED):middle + PLACES_TRIED],
                   key=lambda first: abs(first - old))[:PLACES_TRIED]
    places = []
    for first in tried:
        if lines[first:first + len(body)] == body:
            places.append(first)
            if len(places) == 2:  # (a chunk nearer may take the nearest)
                break
    return places


def _stale_pieces(rows: list[dict], at_line: dict[str, list[int]]) -> list[str]:
    """The ids of the pieces of definitions whose signature line the file no longer holds:
    each piece of a definition too long for one chunk was embedded with its signature (its
    context), so kept it would be found by the definition's old name. Pieces are runs of
    chunks with one kind and symbol, none other between them; the signature line is the
    first of the first piece that names the symbol (a decorator or a doc comment may come
    before it), or its first line."""
    runs: list[list[dict]] = []
    for row in sorted(rows, key=lambda row: (row["start_line"], row["end_line"])):
        key = (row.get("kind", ""), row.get("symbol", ""))
        if runs and key[1] and key == (runs[-1][0].get("kind", ""), runs[-1][0].get("symbol")):
            runs[-1].append(row)
        else:
            runs.append([row])
    stale = []
    for run in runs:
        if len(run) < 2:
            continue
        name = run[0]["symbol"].rsplit(".", 1)[-1]
        first_lines = (run[0].get("text") or "").split("\n")
        signature = next((line for line in first_lines if name in line), first_lines[0])
        if signature not in at_line:
            stale.extend(row["id"] for row in run)
    return stale


@dataclass(frozen=True)
class StoredPlaces:
    """Where a drafted file's stored chunks are now."""

    # The chunks the draft was given, by id: the lines (first, last) their text is at now, or
    # None where it changed.
    by_id: dict[str, tuple[int, int] | None]
    # The places of the kept ones by their content (see rag_lsp.store.chunk_ids), for chunks
    # written since the draft was made: the update of an earlier save (a save during that
    # update) writes the file's unchanged chunks at lines of their own, under ids of their own.
    by_content: dict[str, list[tuple[int, int]]]

    @classmethod
    def of(cls, stored: Iterable[dict], kept: dict[str, tuple[int, int]]) -> StoredPlaces:
        by_content: dict[str, list[tuple[int, int]]] = {}
        for chunk_id, place in kept.items():
            by_content.setdefault(content_key(chunk_id), []).append(place)
        return cls({row["id"]: kept.get(row["id"]) for row in stored}, by_content)

    def place(self, row: dict) -> tuple[int, int] | None:
        """Where ``row``'s chunk is now, if the file still holds it."""
        if row["id"] in self.by_id:
            return self.by_id[row["id"]]
        places = self.by_content.get(content_key(row["id"]))
        if not places:
            return None
        return min(places, key=lambda place: abs(place[0] - row["start_line"]))

    def kept(self) -> int:
        return sum(place is not None for place in self.by_id.values())
