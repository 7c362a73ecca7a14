"""Tell LanceDB failures apart: a full disk, a folder that cannot be written or a lost commit
race is not damage.

Each used to be reported as "the index is damaged, rebuild it" (for a knowledge base: "move it
aside"), which is the wrong advice: a rebuild needs more space than an update, a read-only
mount loses nothing, and a commit conflict only needs a retry.
"""

from __future__ import annotations

import errno
import os

from rag_lsp.errors import DiskFullError, IndexBusyError, IndexNotWritableError, RagLspError

_DISK_FULL = ("no space left on device", "os error 28", "disk quota exceeded")
# LanceDB's Rust errors carry the OS error as text only: (marker, what it means).
_NOT_WRITABLE = (("read-only file system", "read-only file system"),
                 ("os error 30)", "read-only file system"),
                 ("permission denied", "permission denied"), ("os error 13)", "permission denied"),
                 ("operation not permitted", "operation not permitted"))
_CONFLICT = ("commit conflict", "preempted by concurrent transaction",
             "concurrent transaction")


def transient_failure(exc: BaseException, where: str) -> RagLspError | None:
    """A :class:`DiskFullError`, :class:`IndexNotWritableError` or :class:`IndexBusyError`
    for ``exc`` if it is one of those, else ``None`` (the caller reports damage)."""
    text = str(exc).lower()
    if (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
            marker in text for marker in _DISK_FULL):
        return DiskFullError(
            f"no space left on the device while writing {where}. Free some space and try "
            "again: what was written before is intact, and the next run continues from there.")
    os_reason = (exc.strerror or os.strerror(exc.errno) if isinstance(exc, OSError)
                 and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else None)
    reason = os_reason or next((why for marker, why in _NOT_WRITABLE if marker in text), None)
    if reason:
        # (Reads come here too: files left by another user, `sudo rag-lsp index`.)
        return IndexNotWritableError(
            f"{where} cannot be used here ({reason.lower()}): a read-only mount, or files this "
            "user may not read or write. Give this user access (or set `indexPath`, or pass "
            "--index-path, to keep the index elsewhere) and try again: nothing in it is lost.")
    if any(marker in text for marker in _CONFLICT):
        return IndexBusyError(
            f"another writer changed {where} at the same moment; try again.")
    return None
