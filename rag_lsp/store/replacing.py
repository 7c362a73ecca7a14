"""Which version of the chunks table reads see while a writer replaces files' chunks.

A file's chunks are replaced in two commits: an upsert of its new rows by id, then a delete
of its rows no longer there. LanceDB's one-commit way (a ``merge_insert`` that also deletes
the rows the new data does not match) joins the whole table in memory: +157 MB and 271 ms a
replace at 100k chunks, against +0 MB and 109 ms for the two commits
(``bench/replace_cost.py``, 2026-11-28). So that no reader sees the state between them (a
file's new chunks beside its stale ones, a renamed file under both names), the writer first
writes a marker here naming the version before and the version its last commit will make;
readers that find the table past the first and short of the last read the version before.

The marker is a small JSON file inside the chunks table's folder (so a rebuild swapped in
brings its own), rewritten whole by rename, and synced to disk before the first commit (a
power cut must not keep the commit and lose the marker). It carries a sequence number that
every replace moves on: a reader reads it, then the table's latest version, then it again, and
trusts what it saw only if both reads agree (a seqlock), else it looks again.

Once the last commit is in, the table is whole whatever the marker says: the marker written
after it only saves readers a look. A marker left by a process that died between the commits
keeps readers on the version before until the next writer restores that version (see
``ChunkStore._settle_replace``). Limits: an older rag-lsp knows nothing of the marker, so its
readers may see the state between the commits, and a commit of its own made just after such a
crash (the one version between) would be taken for the replace's and rolled back by the next
restore (its run redoes what it wrote, as the file records say).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rag_lsp.store.private import write_private

log = logging.getLogger(__name__)

MARKER_NAME = "replacing.json"
# Looks after which a reader that keeps finding the marker changed pauses between looks.
_QUICK_TRIES = 5


@dataclass(frozen=True)
class Replacing:
    """The marker's content: ``before`` and ``last`` are ``None`` once no replace is under
    way; else the version before the replace and the one its last commit makes."""

    seq: int
    before: int | None = None
    last: int | None = None

    def holds(self, latest: int) -> bool:
        """Whether a table at ``latest`` is between the replace's commits, so that readers
        should read ``before``."""
        return (self.before is not None and self.last is not None
                and self.before < latest < self.last)


def _version_or_none(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a version is a number, not {value!r}")
    return value


def read_marker(table_dir: Path) -> Replacing | None:
    """The marker of the table at ``table_dir``, or ``None`` (none, or unreadable: then
    readers follow the latest version, as before markers existed)."""
    try:
        with open(table_dir / MARKER_NAME, encoding="utf-8") as source:
            raw = json.load(source)
        return Replacing(int(raw["seq"]), _version_or_none(raw.get("before")),
                         _version_or_none(raw.get("last")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignoring the replace marker in %s (%s)", table_dir, exc)
        return None


def write_marker(table_dir: Path, marker: Replacing, *, durable: bool = False) -> None:
    """Replace the marker whole: a reader sees the old one or the new one, never a part.
    ``durable``: on disk before this returns (the file and the rename)."""
    partial = table_dir / f".{MARKER_NAME}.tmp"
    write_private(partial, json.dumps(marker.__dict__), durable=durable)
    os.replace(partial, table_dir / MARKER_NAME)
    if durable and os.name != "nt":  # the rename too (Windows opens no folder to sync)
        folder = os.open(table_dir, os.O_RDONLY)
        try:
            os.fsync(folder)
        except OSError:  # a file system that cannot sync a folder: the file is synced
            pass
        finally:
            os.close(folder)


def visible_version(table_dir: Path, latest_version: Callable[[], int]) -> int:
    """The version reads should see: ``latest_version()``, or the version before a replace
    under way. ``latest_version`` is asked between two reads of the marker, until both reads
    agree (a replace takes ~0.1 s and a look well under a millisecond: a second look is
    rare, a third rarer still)."""
    tries = 0
    while True:
        first = read_marker(table_dir)
        latest = latest_version()
        again = read_marker(table_dir)
        if first == again:
            break
        tries += 1
        if tries >= _QUICK_TRIES:
            time.sleep(0.001)  # let the writer's commit land
    if again is not None and again.holds(latest):
        assert again.before is not None
        return again.before
    return latest
