"""Reading a workspace's own files, never a file elsewhere.

The index only holds files inside the root, but a path read again later (a definition's whole
text for context, an anchor's lines) may have become a link to a file outside since it was
indexed. So the path is resolved (``..``, every link) and must land inside the root, and the
file it landed on is opened without following a link put there in between.
"""

from __future__ import annotations

import os
from pathlib import Path


class OutsideWorkspaceError(OSError):
    """The path leads outside the workspace root (through a link, or ``..``)."""


def real_path_inside(root: Path, rel: str) -> Path | None:
    """The real path of ``root / rel`` when it lies inside ``root``, else ``None``."""
    try:
        real = (root / rel).resolve()
        real.relative_to(root.resolve())
    except (ValueError, OSError):  # outside, a link loop, or a NUL in the path
        return None
    return real


def read_inside(root: Path, rel: str) -> str:
    """The text of ``root / rel`` (undecodable bytes replaced). Raises
    :class:`OutsideWorkspaceError` when the path leads outside the root, or another
    :class:`OSError` when the file cannot be read."""
    real = real_path_inside(root, rel)
    if real is None:
        raise OutsideWorkspaceError(f"{rel} leads outside the workspace {root}")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(real, flags), "rb") as source:
        return source.read().decode("utf-8", errors="replace")
