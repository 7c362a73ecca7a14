"""Index folders readable by their owner only.

An index holds the text of every indexed file and the knowledge bases hold findings, so they
are as private as the most private source: the folder is created 0700 (and an existing one of
ours tightened), which keeps every file inside it from other users whatever its own mode.
"""

from __future__ import annotations

import os
from pathlib import Path

from rag_lsp.config import DEFAULT_INDEX_DIR_NAME
from rag_lsp.confined import LinkLoopError, resolve_or_loop
from rag_lsp.errors import RagLspError

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a link put where an index file goes is not written


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) and make it owner-only; returns ``path``."""
    if path.is_symlink() and not path.exists():
        raise RagLspError(
            f"the index folder {path} is a link to {os.readlink(path)}, which does not exist. "
            "Remove the link, or create the folder it names, or set `indexPath` (or pass "
            "--index-path) to put the index somewhere else.")
    if path.exists() and not path.is_dir():
        raise RagLspError(
            f"the index folder {path} exists but is not a folder. Move that file aside, or set "
            "`indexPath` (or pass --index-path) to put the index somewhere else.")
    try:
        path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    except OSError as exc:  # a read-only checkout or mount, a path under /proc…
        raise RagLspError(
            f"cannot create the index folder {path}: {exc.strerror or exc}. Make its parent "
            "writable, or set `indexPath` (or pass --index-path) to put the index somewhere "
            "you can write.") from exc
    try:
        if path.stat().st_uid == os.getuid() and path.stat().st_mode & 0o077:
            path.chmod(PRIVATE_DIR)
    except OSError:
        pass  # not ours to change (a shared, read-only mount): leave it as it is
    return path


def refuse_index_links(root: Path, index_dir: Path, *, default: bool) -> None:
    """An index folder inside the workspace may come with it: a cloned repository can hold a
    ``.rag-lsp`` link to any folder, or a ``.rag-lsp/`` folder with links in it
    (``writer.lock`` to a file of the user's, a table to a folder elsewhere). Writing
    through them would overwrite that file, or put the index (the text of every file)
    where the repository chose. rag-lsp makes no link in an index, so one there is refused
    (:class:`RagLspError`); so is the default folder itself linked out of the workspace
    (``indexPath`` puts the index anywhere on purpose)."""
    real_root = root.resolve()
    try:
        real_index = resolve_or_loop(index_dir)
    except LinkLoopError as exc:
        raise RagLspError(f"the index folder {index_dir} is a loop of links; it names no "
                          "folder. Remove the link, or set `indexPath` (or pass --index-path) "
                          "to put the index somewhere else.") from exc
    if default and index_dir.is_symlink():
        target = real_index
        if not (target == real_root or real_root in target.parents):
            raise RagLspError(
                f"the index folder {index_dir} is a link to {target}, outside the workspace "
                f"{root}; an index there is not written (a repository can hold such a link). "
                "Remove the link, or set `indexPath` in the editor's settings (or pass "
                "--index-path) to keep the index there on purpose.")
    if not (real_root in real_index.parents and real_index.is_dir()):
        return  # outside the workspace (given on purpose), or not made yet
    for folder, dirs, files in os.walk(real_index):  # (os.walk follows no folder link)
        for name in dirs + files:
            entry = os.path.join(folder, name)
            if os.path.islink(entry):
                raise RagLspError(
                    f"the index folder {index_dir} holds a link, {entry} -> "
                    f"{os.readlink(entry)}; rag-lsp makes none (a repository can hold one to "
                    "make the index write elsewhere). Delete the index folder (it is built "
                    "again), or set `indexPath` (or pass --index-path) to keep the index "
                    "elsewhere.")


# So `git status` never lists an index (it holds the text of every indexed file), as .venv's
# and .pytest_cache's own .gitignore do.
INDEX_GITIGNORE = "# rag-lsp's index: derived from the workspace, never to be committed\n*\n"


def index_folder(path: Path) -> Path:
    """:func:`private_dir` for an index folder, with a ``.gitignore`` ignoring all of it when
    the folder is rag-lsp's: made here, or the default ``.rag-lsp`` (made by an older
    rag-lsp). A folder of the user's own given as ``indexPath`` is left as it is."""
    made = not path.exists()
    private_dir(path)
    ignore = path / ".gitignore"
    if (made or path.name == DEFAULT_INDEX_DIR_NAME) and not ignore.exists():
        try:
            write_private(ignore, INDEX_GITIGNORE)
        except OSError:  # a read-only index (a reader's mount): git lists it, nothing worse
            pass
    return path


def write_private(path: Path, text: str, *, durable: bool = False) -> None:
    """Write ``text`` to a new owner-only file (mode set at creation, never widened);
    ``durable``: on disk before this returns (synced through the handle that wrote it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NO_FOLLOW, PRIVATE_FILE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
        if durable:
            out.flush()
            os.fsync(out.fileno())
