"""Reading a workspace's own files, never a file elsewhere.

The index only holds files inside the root, but a path read again later (a definition's whole
text for context, an anchor's lines) may have become a link to a file outside since it was
indexed. So the path is resolved (``..``, every link) and must land inside the root. The
file it landed on is then opened one folder at a time from the root, following no link: a
file or a folder above it swapped for a link in between is refused, not followed out.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from rag_lsp.errors import BadInputError


class OutsideWorkspaceError(OSError):
    """The path leads outside the workspace root (through a link, or ``..``)."""


class NotAFileError(OSError):
    """The path is a FIFO, socket or device: reading one could wait forever, or never end."""


def resolved(path: Path, what: str) -> Path:
    """``path`` with ``..`` and every link resolved; :class:`BadInputError` naming ``what``
    when it holds a NUL or its links loop."""
    if "\0" in str(path):
        raise BadInputError(f"{what}: {str(path)!r} holds a NUL character; no file name can")
    try:
        return resolve_or_loop(path)
    except LinkLoopError as exc:
        raise BadInputError(f"{what}: {path} is a loop of symbolic links; it names no file"
                            ) from exc


class LinkLoopError(OSError):
    """The path's links loop: it names nothing."""


def resolve_or_loop(path: Path) -> Path:
    """``path.resolve()``, a path not made yet resolved as far as it goes, or
    :class:`LinkLoopError`. (A loop raises RuntimeError before Python 3.13; from 3.13 a
    non-strict resolve returns the looping path as it is, so it is asked strictly first.)"""
    try:
        return path.resolve(strict=True)
    except FileNotFoundError:
        return path.resolve()
    except RuntimeError as exc:
        raise LinkLoopError(errno.ELOOP, "a loop of symbolic links", str(path)) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkLoopError(errno.ELOOP, "a loop of symbolic links", str(path)) from exc
        return path.resolve()  # (a file where a folder should be: nothing there, no loop)


def real_path_inside(root: Path, rel: str) -> Path | None:
    """The real path of ``root / rel`` when it lies inside ``root``, else ``None``."""
    real_root = _real_root(root)
    parts = None if real_root is None else _parts_inside(real_root, rel)
    return None if parts is None else real_root.joinpath(*parts)


def _real_root(root: Path) -> Path | None:
    try:
        return root.resolve()
    except (OSError, RuntimeError):  # a loop of links (Python before 3.13: RuntimeError)
        return None


def _parts_inside(real_root: Path, rel: str) -> tuple[str, ...] | None:
    """The parts of ``real_root / rel``'s real path below ``real_root`` (a real path), or
    ``None`` when it lies outside."""
    try:
        return (real_root / rel).resolve().relative_to(real_root).parts
    except (ValueError, OSError, RuntimeError):  # outside, a NUL in the path, a link loop
        return None


_NO_LINK = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NO_WAIT = getattr(os, "O_NONBLOCK", 0)  # (Windows has no FIFOs to wait on)
_WALKS_FOLDERS = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")


def _open_below(root: Path, parts: tuple[str, ...], flags: int) -> int:
    """An open descriptor of ``root / *parts``, reached one folder at a time from ``root``
    without following a link (where the platform allows; else the last part only)."""
    if not _WALKS_FOLDERS:
        return os.open(root.joinpath(*parts), flags | _NO_LINK)
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | _NO_LINK, dir_fd=folder)
            os.close(folder)
            folder = below
        return os.open(parts[-1], flags | _NO_LINK, dir_fd=folder)
    finally:
        os.close(folder)


def _regular(fd: int, path: Path) -> BinaryIO:
    """``fd``, opened without waiting, as a blocking binary file when it is a regular file;
    :class:`NotAFileError` (``fd`` closed) for a FIFO, socket, device or folder."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFileError(errno.EINVAL, "not a regular file (a folder, FIFO, socket or "
                                "device)", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: Path) -> BinaryIO:
    """``path`` (links followed) opened for reading when it is a regular file; anything else
    raises :class:`NotAFileError` before a byte is read: opening a FIFO for reading waits
    for a writer, so it is opened without waiting and looked at first."""
    flags = os.O_RDONLY | _NO_WAIT | getattr(os, "O_CLOEXEC", 0)
    return _regular(os.open(path, flags), path)


def open_inside(root: Path, rel: str) -> BinaryIO:
    """``root / rel`` opened for reading, a regular file inside the root: resolved first
    (``..``, links), then opened one folder at a time from the root following no link, so a
    link swapped in meanwhile is refused. Raises :class:`OutsideWorkspaceError` (outside, or
    a link swapped in), :class:`NotAFileError`, or another :class:`OSError`."""
    real_root = _real_root(root)
    parts = None if real_root is None else _parts_inside(real_root, rel)
    if real_root is None or parts is None:
        raise OutsideWorkspaceError(f"{rel} leads outside the workspace {root}")
    path = real_root.joinpath(*parts)
    if not parts:
        raise NotAFileError(errno.EISDIR, "the workspace folder itself, not a file", str(path))
    try:
        fd = _open_below(real_root, parts, os.O_RDONLY | _NO_WAIT)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _link_on_way(real_root, parts):
            raise OutsideWorkspaceError(
                exc.errno, "a link took the place of a file or folder on its path while it "
                "was read; it is not followed", str(path)) from exc
        if exc.errno == errno.ENOTDIR:  # a folder on its way is a file now: no such file
            raise FileNotFoundError(errno.ENOENT, "a folder on its path is now a file",
                                    str(path)) from exc
        raise
    return _regular(fd, path)


def _link_on_way(real_root: Path, parts: tuple[str, ...]) -> bool:
    """True when a link stands at ``real_root / parts`` or on the way there."""
    return any(real_root.joinpath(*parts[:end]).is_symlink() for end in range(1, len(parts) + 1))


def read_inside(root: Path, rel: str) -> str:
    """The text of ``root / rel`` (undecodable bytes replaced), read as :func:`open_inside`
    opens it."""
    with open_inside(root, rel) as source:
        return source.read().decode("utf-8", errors="replace")
