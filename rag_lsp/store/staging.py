"""A full rebuild made beside the live index, then swapped in.

The new build goes to ``<index>/rebuild/`` (its own manifest, tables and file digests)
while searches keep using the live index. When it is complete, :func:`swap_in` moves it into
place: the old tables go aside, the new ones take their names (and their digests follow),
and the manifest — whose ``created_at`` tells readers in other processes that the index was
rebuilt — is replaced last, then the old tables are deleted. Only the code index moves; the
knowledge bases and the writer lock beside it stay where they are.

Every step runs under the index's writer lock, so :func:`settle` (called by the next writer)
sees either a build that never finished — deleted, the live index was never touched — or a
swap cut short after the build was marked complete, which it finishes.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from rag_lsp.store.integrity import INTEGRITY_NAME
from rag_lsp.store.lance_store import CHUNKS, FILES
from rag_lsp.store.manifest import MANIFEST_NAME
from rag_lsp.store.private import private_dir, write_private

log = logging.getLogger(__name__)

STAGING_NAME = "rebuild"
TABLE_DIRS = (f"{CHUNKS}.lance", f"{FILES}.lance")
# Written once the staged build is complete: from then on an interrupted swap is finished,
# not thrown away.
READY_NAME = "ready"
_OLD_PREFIX = "old-"


def staging_dir(index_dir: Path) -> Path:
    return index_dir / STAGING_NAME


def fresh_staging(index_dir: Path) -> Path:
    """An empty staging folder (a leftover of an interrupted rebuild is settled first)."""
    settle(index_dir)
    return private_dir(staging_dir(index_dir))


def swap_under_way(index_dir: Path) -> bool:
    """True while a complete build waits to be (or is being) moved into place."""
    return (staging_dir(index_dir) / READY_NAME).exists()


def swap_in(index_dir: Path) -> None:
    """Replace the live index's tables and manifest with the staged build's."""
    write_private(staging_dir(index_dir) / READY_NAME, "")
    _finish_swap(index_dir)


def settle(index_dir: Path) -> bool:
    """Deal with what an interrupted rebuild left: finish a swap that was under way, or
    delete an unfinished build. True when the live index changed (a swap was finished)."""
    staging = staging_dir(index_dir)
    if not staging.exists():
        return False
    if swap_under_way(index_dir):
        log.info("finishing the switch to the index rebuilt in %s", staging)
        _finish_swap(index_dir)
        return True
    log.info("removing an unfinished rebuild of the index from %s", staging)
    discard(index_dir)
    return False


def discard(index_dir: Path) -> None:
    """Delete the staging folder (an unfinished rebuild); the live index is untouched."""
    shutil.rmtree(staging_dir(index_dir), ignore_errors=True)


def _finish_swap(index_dir: Path) -> None:
    # Each step can be repeated after a crash: a table already moved is skipped, and the
    # old tables live inside the staging folder, which goes last.
    staging = staging_dir(index_dir)
    for name in TABLE_DIRS:
        new, live = staging / name, index_dir / name
        if not new.exists():
            continue
        if live.exists():
            os.replace(live, staging / f"{_OLD_PREFIX}{name}")
        os.replace(new, live)
    # The digests of the new tables' files, before the manifest that makes them the index.
    digests = staging / INTEGRITY_NAME
    if digests.exists():
        os.replace(digests, index_dir / INTEGRITY_NAME)
    manifest = staging / MANIFEST_NAME
    if manifest.exists():
        os.replace(manifest, index_dir / MANIFEST_NAME)
    shutil.rmtree(staging, ignore_errors=True)
