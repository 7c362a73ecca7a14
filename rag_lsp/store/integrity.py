"""Digests of a LanceDB table's files, so damage LanceDB reads without complaint is caught.

Garbage written over the start or end of a data file makes LanceDB fail, and that is
reported as damage; the same garbage in the middle of the file can land in the vectors or
the text, which LanceDB reads back as values: searches then silently answer wrong. LanceDB
never changes a file once it is written under its final name (a write goes to ``.tmp…`` or
``…#1`` and is renamed when complete; new rows, deletions, compactions and indexes add new
files, and cleanup removes old ones), so a file's size and checksum, recorded once, say
whether it is still what was written.

A sidecar beside the tables (``integrity.json`` for the code index) maps each covered file,
by its path relative to the index folder, to its size, mtime and CRC-32. A process that
writes records the files not recorded yet after each commit, and forgets those that are
gone; checking compares the files still there with the map. A file that is not in the map —
written by an older rag-lsp, or by a writer that has not recorded it yet — is trusted on
first sight and recorded then: the map can only vouch for what it saw.

CRC-32 and not a cryptographic hash: the threat is accidental damage (a disk, a stray tool),
not someone who can write the folder (they could rewrite the sidecar as well), and zlib's
CRC is the cheaper to compute (bench/integrity_cost.py compares the two).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

INTEGRITY_NAME = "integrity.json"
_FORMAT = 1
_BUFFER = 1 << 20
# What LanceDB writes once and never changes. Not ``_versions/latest_version_hint.json``,
# which every commit rewrites in place.
_IMMUTABLE_DIRS = ("data", "_deletions", "_indices", "_transactions")


@dataclass(frozen=True)
class Digest:
    size: int
    mtime_ns: int
    crc32: int


def file_crc32(path: Path) -> int:
    """The CRC-32 of a file's bytes (zlib releases the GIL: other threads keep running)."""
    crc = 0
    buffer = bytearray(_BUFFER)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as source:
        while read := source.readinto(buffer):
            crc = zlib.crc32(view[:read], crc)
    return crc


def _walk(folder: str, relative: str, found: dict[str, os.stat_result]) -> None:
    try:
        entries = os.scandir(folder)
    except FileNotFoundError:
        return  # removed by a cleanup (or a rebuild) meanwhile
    with entries:
        for entry in entries:
            if entry.name.startswith(".") or "#" in entry.name:
                # A write under way (``.tmp…``, ``….manifest#1``), renamed when complete.
                continue
            name = f"{relative}/{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                _walk(entry.path, name, found)
            elif entry.is_file(follow_symlinks=False):
                try:
                    found[name] = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue


def table_files(index_dir: Path, tables: tuple[str, ...]) -> dict[str, os.stat_result]:
    """The covered files of ``tables`` (folder names in ``index_dir``), by their path
    relative to ``index_dir`` (``chunks.lance/data/….lance``), with their stat."""
    found: dict[str, os.stat_result] = {}
    for table in tables:
        for kind in _IMMUTABLE_DIRS:
            _walk(os.path.join(index_dir, table, kind), f"{table}/{kind}", found)
        versions: dict[str, os.stat_result] = {}
        _walk(os.path.join(index_dir, table, "_versions"), f"{table}/_versions", versions)
        found.update((name, info) for name, info in versions.items()
                     if name.endswith(".manifest"))
    return found


class FileDigests:
    """The recorded digests of some tables' files in one index folder."""

    def __init__(self, index_dir: Path, tables: tuple[str, ...], name: str = INTEGRITY_NAME):
        self.index_dir = index_dir
        self.tables = tables
        self.path = index_dir / name
        # Files whose bytes a check found unchanged although their mtime moved (a copied
        # folder): the next record notes the new mtime so they are not read every time.
        self._confirmed: dict[str, Digest] = {}

    def load(self) -> dict[str, Digest]:
        """The recorded map; an unreadable one is started afresh (it is only an aid: every
        file is then trusted on first sight again), and the log says so."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != _FORMAT:
                return {}
            return {name: Digest(*entry) for name, entry in data["files"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("%s is unreadable (%s); recording the index's files afresh",
                        self.path, exc)
            return {}

    def damage(self, *, full: bool) -> str | None:
        """What no longer matches its digest (``None`` when everything recorded does).

        Sizes are always compared, and a file whose mtime moved is read; ``full`` reads every
        recorded file (bit rot keeps both). Files gone are skipped: a cleanup removes files,
        and a lost file is LanceDB's to report when it is read."""
        recorded = self.load()
        present = table_files(self.index_dir, self.tables)
        for name, digest in sorted(recorded.items()):
            info = present.get(name)
            if info is None:
                continue
            if info.st_size != digest.size:
                return (f"{name} changed after it was written: {info.st_size} bytes, "
                        f"{digest.size} when written")
            if not full and info.st_mtime_ns == digest.mtime_ns:
                continue
            try:
                crc = file_crc32(self.index_dir / name)
            except FileNotFoundError:
                continue
            except OSError as exc:  # an I/O error reading it is damage too
                return f"{name} cannot be read ({exc})"
            if crc != digest.crc32:
                return f"{name} changed after it was written: its bytes are not the ones written"
            if info.st_mtime_ns != digest.mtime_ns:
                self._confirmed[name] = Digest(digest.size, info.st_mtime_ns, crc)
        return None

    def record(self) -> None:
        """Add the files not recorded yet, forget those gone. Called by the writer after a
        commit; a sidecar that cannot be written is logged, never fatal (its files are
        trusted on first sight next time)."""
        try:
            recorded = self.load()
            present = table_files(self.index_dir, self.tables)
            updated = {name: recorded[name] for name in present if name in recorded}
            for name, confirmed in self._confirmed.items():
                if name in updated and updated[name].crc32 == confirmed.crc32:
                    updated[name] = confirmed
            self._confirmed.clear()
            for name, info in present.items():
                if name in updated:
                    continue
                try:  # trusted on first sight
                    crc = file_crc32(self.index_dir / name)
                except FileNotFoundError:
                    continue  # removed by another knowledge writer's cleanup meanwhile
                updated[name] = Digest(info.st_size, info.st_mtime_ns, crc)
            if updated != recorded:
                self._write(updated)
        except OSError as exc:
            log.warning("could not record the digests of %s: %s", self.index_dir, exc)

    def _write(self, digests: dict[str, Digest]) -> None:
        text = json.dumps({"format": _FORMAT, "algorithm": "crc32", "files": {
            name: [d.size, d.mtime_ns, d.crc32] for name, d in sorted(digests.items())}})
        # A temporary file of its own (mkstemp makes it owner-only, like every index file)
        # then a rename: a reader never sees half a map, and writers racing (knowledge
        # writers take no lock) each leave a whole one; the loser's new entries are
        # recorded again by the next write.
        fd, tmp = tempfile.mkstemp(dir=self.index_dir, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
