"""When searches last read an index's full-text index, in any process that shares the index.

Past ``POSTINGS_MAX_ROWS`` chunks every lexical search runs LanceDB's full-text query, which
reads each row outside the full-text index one by one, so the index's writer folds each batch
in while searches come (``FOLD_AFTER_SEARCH_SECONDS`` in rag_lsp.indexing.indexer), and not
otherwise: each fold adds a segment to the ANN index, which past a few is trained again.
The searches of the writer's own process are seen in memory; those of another process on the
same index (``rag-lsp mcp`` beside the editor's server) through the modification time of a
file in the index folder, which each searching process touches at most every
:data:`MARK_EVERY_SECONDS`.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from rag_lsp.store.private import write_private

MARK_NAME = "searched"
# A touch (a system call) on a search's thread at most this often: well within the writer's
# window of a minute.
MARK_EVERY_SECONDS = 5.0


class SearchMark:
    """This process's searches of one index's full-text index, and the file that tells the
    other processes sharing it."""

    def __init__(self, index_dir: Path):
        self.path = Path(index_dir) / MARK_NAME
        self._searched_at: float | None = None  # monotonic, this process's last search
        self._marked_at = -math.inf

    def searched(self) -> None:
        """A search of this process is reading the full-text index."""
        now = time.monotonic()
        self._searched_at = now
        if now - self._marked_at < MARK_EVERY_SECONDS:
            return
        self._marked_at = now
        try:
            os.utime(self.path)
        except FileNotFoundError:
            try:
                write_private(self.path, "")
            except OSError:  # the folder went (a rebuild's staging folder, a removed index)
                pass
        except OSError:  # a folder this process may not write: its own searches still count
            pass

    def searched_within(self, seconds: float) -> bool:
        """Whether a search of this process, or of another one sharing the index, read its
        full-text index in the last ``seconds``."""
        searched_at = self._searched_at
        if searched_at is not None and time.monotonic() - searched_at < seconds:
            return True
        try:
            return time.time() - self.path.stat().st_mtime < seconds
        except OSError:
            return False
