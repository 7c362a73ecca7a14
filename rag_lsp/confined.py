"""Reading a workspace's own files, never a file elsewhere.

The index only holds files inside the root, but a path read again later (a definition's whole
text for context, an anchor's lines) may have become a link to a file outside since it was
indexed. So the path is resolved (``..``, every link) and must land inside the root, and the
file it landed on is opened without following a link put there in between (the file itself:
a folder above it swapped for a link in that moment is not caught).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from rag_lsp.errors import BadInputError


class OutsideWorkspaceError(OSError):
    """The path leads outside the workspace root (through a link, or ``..``)."""


class NotAFileError(OSError):
    """The path is a FIFO, socket or device: reading one could wait forever, or never end."""


def resolved(path: Path, what: str) -> Path:
    """``path`` with ``..`` and every link resolved; :class:`BadInputError` naming ``what``
    when it holds a NUL or its links loop (Python before 3.13 raises RuntimeError for a
    loop, later OSError)."""
    if "\0" in str(path):
        raise BadInputError(f"{what}: {str(path)!r} holds a NUL character; no file name can")
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:
        raise BadInputError(f"{what}: {path} is a loop of symbolic links; it names no file"
                            ) from exc


def real_path_inside(root: Path, rel: str) -> Path | None:
    """The real path of ``root / rel`` when it lies inside ``root``, else ``None``."""
    try:
        real = (root / rel).resolve()
        real.relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):  # outside, a NUL in the path, a link loop
        return None  # (Python before 3.13 raises RuntimeError for a loop)
    return real


def _read_regular_file(path: Path) -> str:
    """The text of the regular file at ``path``, a real path (a link there is not followed;
    undecodable bytes replaced). Anything else raises :class:`NotAFileError` before a byte
    is read: opening a FIFO for reading waits for a writer, so it is opened without waiting
    and looked at first."""
    flags = (os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFileError(errno.EINVAL, "not a regular file (a FIFO, socket or device)",
                                str(path))
        os.set_blocking(fd, True)
        source = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with source:
        return source.read().decode("utf-8", errors="replace")


def read_inside(root: Path, rel: str) -> str:
    """The text of ``root / rel`` (undecodable bytes replaced). Raises
    :class:`OutsideWorkspaceError` when the path leads outside the root, or another
    :class:`OSError` when the file cannot be read."""
    real = real_path_inside(root, rel)
    if real is None:
        raise OutsideWorkspaceError(f"{rel} leads outside the workspace {root}")
    return _read_regular_file(real)
