"""Tell LanceDB failures apart: a full disk or a lost commit race is not damage.

Both used to be reported as "the index is damaged, rebuild it", which is the wrong advice: a
rebuild needs more space than an update, and a commit conflict only needs a retry.
"""

from __future__ import annotations

import errno

from rag_lsp.errors import DiskFullError, IndexBusyError, RagLspError

_DISK_FULL = ("no space left on device", "os error 28", "disk quota exceeded")
_CONFLICT = ("commit conflict", "preempted by concurrent transaction",
             "concurrent transaction")


def transient_failure(exc: BaseException, where: str) -> RagLspError | None:
    """A :class:`DiskFullError` or :class:`IndexBusyError` for ``exc`` if it is one of
    those, else ``None`` (the caller reports damage)."""
    text = str(exc).lower()
    if (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
            marker in text for marker in _DISK_FULL):
        return DiskFullError(
            f"no space left on the device while writing {where}. Free some space and try "
            "again: what was written before is intact, and the next run continues from there.")
    if any(marker in text for marker in _CONFLICT):
        return IndexBusyError(
            f"another writer changed {where} at the same moment; try again.")
    return None
