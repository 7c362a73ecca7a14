"""Which version of the chunks table reads see while a writer replaces files' chunks.

A file's chunks are replaced in two commits: an upsert of its new rows by id, then a delete
of its rows no longer there. LanceDB's one-commit way (a ``merge_insert`` that also deletes
the rows the new data does not match) joins the whole table in memory: +173 MB and 290 ms a
replace at 100k chunks, against +5 MB and 104 ms for the two commits
(``bench/replace_cost.py``). So that no reader sees the state between them (a file's new
chunks beside its stale ones, a renamed file under both names), the writer first writes a
marker here, naming the version before and the last version the replace may commit; readers
that find it read the version before. When both commits are in, the marker says so and
readers follow the latest version again.

The marker is a small JSON file inside the chunks table's folder (so a rebuild swapped in
brings its own), rewritten whole by rename. It carries a sequence number that every replace
moves on: a reader reads it, then the table's latest version, then it again, and trusts what
it saw only if both reads agree (a seqlock), else it looks again.

A marker left by a process that died between the two commits keeps readers on the version
before, until the next writer restores that version (see ``ChunkStore``); a later commit than
the replace may have made (by an older rag-lsp, which knows nothing of the marker) makes it
stale, and readers follow the latest version again.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from rag_lsp.store.private import write_private

log = logging.getLogger(__name__)

MARKER_NAME = "replacing.json"
# Times a reader looks again when a replace began or ended while it looked.
_TRIES = 5


@dataclass(frozen=True)
class Replacing:
    """The marker's content: ``before`` is ``None`` when no replace is under way."""

    seq: int
    before: int | None = None
    last: int | None = None

    def holds(self, latest: int) -> bool:
        """Whether readers should read ``before`` rather than ``latest``."""
        return (self.before is not None and self.last is not None
                and self.before < latest <= self.last)


def read_marker(table_dir: Path) -> Replacing | None:
    """The marker of the table at ``table_dir``, or ``None`` (none, or unreadable: then
    readers follow the latest version, as before markers existed)."""
    try:
        with open(table_dir / MARKER_NAME, encoding="utf-8") as source:
            raw = json.load(source)
        return Replacing(int(raw["seq"]), raw.get("before"), raw.get("last"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring the replace marker in %s (%s)", table_dir, exc)
        return None


def write_marker(table_dir: Path, marker: Replacing) -> None:
    """Replace the marker whole: a reader sees the old one or the new one, never a part."""
    partial = table_dir / f".{MARKER_NAME}.tmp"
    write_private(partial, json.dumps(marker.__dict__))
    os.replace(partial, table_dir / MARKER_NAME)


def visible_version(table_dir: Path, latest_version) -> int:
    """The version reads should see: ``latest_version()``, or the version before a replace
    under way. ``latest_version`` is asked between two reads of the marker."""
    for _ in range(_TRIES):
        first = read_marker(table_dir)
        latest = latest_version()
        again = read_marker(table_dir)
        if first == again:
            break
    if again is not None and again.holds(latest):
        assert again.before is not None
        return again.before
    return latest
