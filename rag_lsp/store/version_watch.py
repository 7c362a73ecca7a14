"""The chunks table's latest version, asked of LanceDB only when it may have moved.

Every search reads the table at its latest version (another process, or this one's writer,
may have committed since the last search). Asking LanceDB is a round trip through its
event-loop thread, 0.5-1.3 ms beside a search's other threads and more while a writer's
calls queue there (``bench/README.md``). A commit adds a manifest to the table's
``_versions`` folder, which moves the folder's mtime, so a ``stat`` of the folder (a few
microseconds) tells whether the version known from the last ask can still be the latest.

A folder's mtime is as fine as the file system's clock tick (coarse: milliseconds, or whole
seconds on some file systems), so two commits within one tick can leave it unchanged. As
git does with its index ("racily clean" entries), a version is trusted from the ``stat``
alone only if the folder's mtime was already older than a tick when the version was asked:
a commit after that ask then has a later mtime.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

VERSIONS_DIR = "_versions"
# How old a folder's mtime must be when the version is asked for the answer to be kept: a few
# coarse clock ticks where timestamps have sub-second digits, else past whole seconds (FAT,
# some network file systems keep 1- or 2-second times).
_FINE_SETTLE_NS = 50_000_000
_COARSE_SETTLE_NS = 2_100_000_000

_Key = tuple[int, int, int, int]


def _folder_key(folder: Path) -> _Key | None:
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size


def _settled(key: _Key, now_ns: int) -> bool:
    mtime_ns = key[2]
    settle_ns = _FINE_SETTLE_NS if mtime_ns % 1_000_000_000 else _COARSE_SETTLE_NS
    return now_ns - mtime_ns > settle_ns


class VersionWatch:
    """``latest()``: what ``ask()`` (LanceDB's latest version of the table at ``table_dir``)
    would answer, asked again only when the table's ``_versions`` folder changed since the
    last answer, or changed too recently to tell (see the module's notes)."""

    def __init__(self, table_dir: Path, ask: Callable[[], int]):
        self._folder = table_dir / VERSIONS_DIR
        self._ask = ask
        # (folder key, version) of the last ask whose folder had settled; the pair is
        # replaced whole, so threads asking at once never see one's key with another's version
        self._known: tuple[_Key, int] | None = None
        self._lock = threading.Lock()
        self.asks = 0  # round trips made (for tests and benches)

    def latest(self) -> int:
        now_ns = time.time_ns()  # before the stat: a commit after it is later than this
        key = _folder_key(self._folder)
        known = self._known
        if key is not None and known is not None and known[0] == key:
            return known[1]
        version = self._ask()
        with self._lock:
            self.asks += 1
            self._known = (key, version) if key is not None and _settled(key, now_ns) else None
        return version

    def forget(self) -> None:
        """Ask next time whatever the folder says (the handle ``ask`` uses was replaced)."""
        self._known = None
