"""Which files of a workspace belong in the index, and how to read them safely.

:class:`WorkspaceFilter` holds the rules (extensions, built-in excludes, configured excludes, every
``.gitignore``); the initial scan and the live updater both ask it, so they always agree.
:func:`read_text_file` never raises: a binary, huge or unreadable file gives a reason string.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from rag_lsp.config import Settings
from rag_lsp.confined import NotAFileError, OutsideWorkspaceError, open_inside, open_regular
from rag_lsp.globs import lenient_globs

log = logging.getLogger(__name__)

# Folders that never hold the user's own source: VCS data, dependencies, caches, build output.
DEFAULT_EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", ".venv", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".eggs", "build", "dist", "target",
    ".next", ".idea", ".rag-lsp",
})
DEFAULT_EXCLUDED_DIR_SUFFIXES = (".egg-info",)
# Generated lock files: large, and never what a question about the code is after.
DEFAULT_EXCLUDED_FILES = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock",
    "Pipfile.lock", "uv.lock", "Cargo.lock", "composer.lock", "Gemfile.lock", "go.sum",
})
VENV_MARKER = "pyvenv.cfg"  # any folder holding this is a virtualenv, whatever its name
BINARY_SNIFF_BYTES = 8192
RULES_FILE_MAX_BYTES = 8 << 20  # a .gitignore past this is not one (a link to /dev/zero, say)
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ScannedFile:
    path: str  # POSIX path relative to the root
    abs_path: Path
    size: int
    mtime_ns: int

    @property
    def root(self) -> Path:
        return self.abs_path.parents[self.path.count("/")]


@dataclass
class ScanReport:
    files: list[ScannedFile]
    # reason -> relative paths ("excluded", "too-large", "unreadable", "symlink-dir",
    # "broken-symlink", "symlink-not-a-file", "symlink-outside-root", "undecodable-name");
    # excluded folders end with "/"; an undecodable name is shown with U+FFFD for the bytes
    # that are not UTF-8.
    skipped: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class FileContent:
    text: str  # LF line endings, no BOM, invalid UTF-8 replaced by U+FFFD
    sha256: str  # of the raw bytes on disk
    had_invalid_utf8: bool


def decodable(rel: str) -> bool:
    """False for a name whose bytes are not UTF-8 (Python keeps them as lone surrogates):
    it cannot be stored, filtered on or sent to a client, so such a file is skipped."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(rel: str) -> str:
    """``rel`` printable: bytes that are not UTF-8 become U+FFFD."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _norm(rel_path: str) -> str:
    # A backslash separates folders on Windows only: elsewhere it is part of a name.
    rel = (rel_path.replace(os.sep, "/") if os.sep != "/" else rel_path).strip("/")
    while rel.startswith("./"):
        rel = rel[2:]
    return "" if rel == "." else rel


def _parent(rel: str) -> str:
    return rel.rpartition("/")[0]


def _ancestors(rel: str) -> list[str]:
    """Folders containing ``rel``, outermost first: "a/b/c.py" -> ["", "a", "a/b"]."""
    parts = rel.split("/")[:-1]
    return [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))]


class WorkspaceFilter:
    """Decides whether a path (relative to ``root``) belongs in the index.

    Built once per root; cheap to ask per file event. ``.gitignore`` files are read lazily and
    cached: call :meth:`forget` when one changes (see :meth:`is_rule_file`).
    """

    def __init__(self, root: Path, settings: Settings, *, index_dir: Path | None = None):
        self.root = Path(root).resolve()
        self.settings = settings
        self._extensions = frozenset(e.lower() for e in settings.extensions)
        self._use_gitignore = settings.use_gitignore
        self._gitignores: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self._dir_cache: dict[str, bool] = {}
        self._config = lenient_globs(list(settings.exclude), "the `exclude` setting")
        self._info_exclude = self._read_spec(git_info_exclude(self.root))
        index = Path(index_dir) if index_dir is not None else settings.index_dir(self.root)
        self._index_rel = self.relative(index)

    def relative(self, path: str | os.PathLike[str]) -> str | None:
        """``path`` as a POSIX path relative to the root, or ``None`` if it lies outside."""
        path = Path(os.path.normpath(self.root / path))  # an absolute ``path`` replaces root
        for candidate in (path, path.resolve()):
            try:
                rel = _norm(candidate.relative_to(self.root).as_posix())
            except ValueError:
                continue
            if rel != ".." and not rel.startswith("../"):  # relative_to is purely lexical
                return rel
        return None

    def includes(self, rel_path: str, is_dir: bool = False) -> bool:
        """True if ``rel_path`` (a file, or a folder when ``is_dir``) is indexed, considering its
        extension, built-in excludes, ``exclude`` and every applicable ignore file."""
        rel = _norm(rel_path)
        if not rel or rel == ".." or rel.startswith("../"):
            return False
        # As in git, nothing inside an excluded folder can be re-included.
        if any(self.excludes_dir(d) for d in _ancestors(rel)[1:]):
            return False
        if is_dir:
            return not self.excludes_dir(rel)
        if rel.rpartition("/")[2] in DEFAULT_EXCLUDED_FILES:
            return False
        return self.has_extension(rel) and not self._ignored(rel, is_dir=False)

    def may_matter(self, rel_path: str) -> bool:
        """Whether a file event at ``rel_path`` could change the index: not inside an excluded
        folder (the index itself, ``.git``, virtualenvs…), and an indexed file, a rule file,
        or possibly a folder (no extension)."""
        rel = _norm(rel_path)
        if not rel or rel == ".." or rel.startswith("../"):
            return False
        if any(self.excludes_dir(d) for d in _ancestors(rel)[1:]) or self.excludes_dir(rel):
            return False
        # A deleted folder has no extension; what is a file right now can be judged by name.
        return (self.has_extension(rel) or self.is_rule_file(rel)
                or not (self.root / rel).is_file())

    def has_extension(self, rel_path: str) -> bool:
        """True if the file name ends with a configured extension (case-insensitive)."""
        return os.path.splitext(rel_path)[1].lower() in self._extensions

    def excludes_dir(self, rel_dir: str) -> bool:
        """True if the folder itself is excluded (its ancestors are not checked)."""
        rel = _norm(rel_dir)
        if rel not in self._dir_cache:
            self._dir_cache[rel] = self._compute_dir_excluded(rel)
        return self._dir_cache[rel]

    def in_index_folder(self, rel_path: str) -> bool:
        """True for the index folder (inside the workspace) and anything in it."""
        rel = _norm(rel_path)
        return bool(self._index_rel) and (rel == self._index_rel
                                          or rel.startswith(self._index_rel + "/"))

    def is_rule_file(self, rel_path: str) -> bool:
        """True for files whose change alters the rules (the caller should then rescan)."""
        rel = _norm(rel_path)
        name = rel.rpartition("/")[2]
        return name in (".gitignore", VENV_MARKER) or rel == ".git/info/exclude"

    def forget(self, rel_path: str) -> None:
        """Drop cached rules after ``rel_path`` (a ``.gitignore``, ``pyvenv.cfg``…) changed."""
        rel = _norm(rel_path)
        self._gitignores.pop(_parent(rel), None)
        if rel == ".git/info/exclude":
            self._info_exclude = self._read_spec(git_info_exclude(self.root))
        self._dir_cache.clear()

    def _compute_dir_excluded(self, rel: str) -> bool:
        if not rel:
            return False
        name = rel.rpartition("/")[2]
        if name in DEFAULT_EXCLUDED_DIRS or name.endswith(DEFAULT_EXCLUDED_DIR_SUFFIXES):
            return True
        if self._index_rel and rel == self._index_rel:
            return True
        if (self.root / rel / VENV_MARKER).is_file():
            return True
        return self._ignored(rel, is_dir=True)

    def _ignored(self, rel: str, *, is_dir: bool) -> bool:
        """Gitignore layers, weakest first; the last one with a matching pattern decides."""
        layers: list[tuple[str, pathspec.GitIgnoreSpec | None]] = []
        if self._use_gitignore:
            layers.append(("", self._info_exclude))
            layers.extend((d, self._gitignore(d)) for d in _ancestors(rel))
        layers.append(("", self._config))
        decision = False
        for base, spec in layers:
            if spec is None:
                continue
            sub = rel[len(base) + 1:] if base else rel
            result = spec.check_file(sub + "/" if is_dir else sub)
            if result.include is not None:
                decision = result.include
        return decision

    def _gitignore(self, rel_dir: str) -> pathspec.GitIgnoreSpec | None:
        if rel_dir not in self._gitignores:
            self._gitignores[rel_dir] = self._read_spec(self.root / rel_dir / ".gitignore")
        return self._gitignores[rel_dir]

    @staticmethod
    def _read_spec(path: Path) -> pathspec.GitIgnoreSpec | None:
        try:
            with open_regular(path) as source:  # a FIFO or /dev/zero there: no hang
                raw = source.read(RULES_FILE_MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read %s (its rules are not applied): %s", path, exc)
            return None
        if len(raw) > RULES_FILE_MAX_BYTES:
            log.warning("%s is over %d MB; its rules are not applied", path,
                        RULES_FILE_MAX_BYTES >> 20)
            return None
        lines = raw.decode("utf-8", errors="replace").splitlines()
        return lenient_globs(lines, path) if lines else None


def git_info_exclude(root: Path) -> Path:
    """The repository's ``info/exclude``. In a linked worktree or a submodule ``.git`` is a
    file (``gitdir: …``) and the exclude file lives in the git directory it names (for a
    worktree, in the main repository's: the ``commondir``)."""
    dot_git = root / ".git"
    if not dot_git.is_file():
        return dot_git / "info" / "exclude"
    line = _small_text(dot_git)
    if line is None or not line.startswith("gitdir:"):
        return dot_git / "info" / "exclude"
    git_dir = (root / line[len("gitdir:"):].strip()).resolve()
    common = _small_text(git_dir / "commondir")
    if common:  # (a submodule's git directory is its own common directory)
        git_dir = (git_dir / common).resolve()
    return git_dir / "info" / "exclude"


def _small_text(path: Path) -> str | None:
    """The stripped text of a small regular file git keeps (``.git`` as a file, a
    ``commondir``), or ``None``: absent, or something else (a FIFO there must not hang)."""
    try:
        with open_regular(path) as source:
            return source.read(4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return None


def scan_workspace(
    root: Path, settings: Settings, *, index_dir: Path | None = None
) -> ScanReport:
    """Every indexable file under ``root``, in path order, plus what was skipped and why.

    Folder symlinks are never followed (no loops); a file symlink is kept if its target is inside
    the root. Excluded folders are not entered. File contents are not read here.
    """
    return scan_folder(WorkspaceFilter(root, settings, index_dir=index_dir), "")


def scan_folder(rules: WorkspaceFilter, rel_dir: str) -> ScanReport:
    """:func:`scan_workspace` under one folder of the root (``""``: all of it), which the
    caller knows to be included."""
    files: list[ScannedFile] = []
    skipped: dict[str, list[str]] = defaultdict(list)
    stack = [rel_dir]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(rules.root / rel_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            log.warning("cannot list %s: %s", rules.root / rel_dir, exc)
            skipped["unreadable"].append(rel_dir + "/")
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                found = _visit(rules, entry, rel, skipped)
            except OSError as exc:  # vanished or unreadable mid-scan
                log.warning("cannot stat %s: %s", entry.path, exc)
                skipped["unreadable"].append(rel)
                continue
            if found == "dir":
                stack.append(rel)
            elif isinstance(found, ScannedFile):
                files.append(found)
    files.sort(key=lambda f: f.path)
    return ScanReport(files=files, skipped=dict(skipped))


# check_path's verdict on a folder to scan.
FOLDER = "folder"


def check_path(rules: WorkspaceFilter, rel: str) -> ScannedFile | str:
    """The scan's verdict on one workspace-relative path (for file events): a ScannedFile
    to index, or why not: "missing", "excluded", "too-large", "symlink-outside-root",
    "symlink-dir" (inside a linked folder); or "folder" for a folder to scan (created, or
    moved here: an event may name it alone)."""
    abs_path = rules.root / rel
    if not decodable(rel):
        return "undecodable-name"
    try:
        if _behind_folder_link(rules.root, rel):  # the scan never goes into one: nor do events
            return "symlink-dir"
        if abs_path.is_dir() and not abs_path.is_symlink():  # (scans follow no folder link)
            return FOLDER if rules.includes(rel, is_dir=True) else "excluded"
        if not abs_path.is_file():
            return "missing"  # deleted, or a broken link
        if abs_path.is_symlink() and rules.relative(os.path.realpath(abs_path)) is None:
            return "symlink-outside-root"
        if not rules.has_extension(rel) or not rules.includes(rel):
            return "excluded"
        info = abs_path.stat()
    except OSError:
        return "missing"  # vanished between the checks
    if info.st_size > rules.settings.max_file_bytes:
        return "too-large"
    return ScannedFile(rel, abs_path, info.st_size, info.st_mtime_ns)


def _behind_folder_link(root: Path, rel: str) -> bool:
    """True when a folder on ``rel``'s way from ``root`` (``root`` resolved) is a link, to
    anywhere: a file beneath is the link's target's, perhaps outside the workspace."""
    parent = os.path.dirname(rel)
    return bool(parent) and Path(os.path.realpath(root / parent)) != root / parent


def _visit(
    rules: WorkspaceFilter, entry: os.DirEntry[str], rel: str, skipped: dict[str, list[str]]
) -> ScannedFile | str | None:
    """One directory entry: ``"dir"`` to descend, a ScannedFile to keep, or None."""
    if not decodable(rel):
        skipped["undecodable-name"].append(shown_name(rel))
        return None
    if entry.is_dir(follow_symlinks=False):
        if rules.excludes_dir(rel):
            skipped["excluded"].append(rel + "/")
            return None
        return "dir"
    if entry.is_symlink():
        if entry.is_dir():
            skipped["symlink-dir"].append(rel)
            return None
        if not rules.has_extension(rel):
            return None
        if not entry.is_file():  # to nothing, or to a FIFO, socket or device
            exists = os.path.exists(entry.path)
            skipped["symlink-not-a-file" if exists else "broken-symlink"].append(rel)
            return None
        if rules.relative(os.path.realpath(entry.path)) is None:
            skipped["symlink-outside-root"].append(rel)
            return None
    elif not entry.is_file(follow_symlinks=False) or not rules.has_extension(rel):
        return None  # sockets, FIFOs, devices, and files of other types
    if not rules.includes(rel):
        skipped["excluded"].append(rel)
        return None
    info = entry.stat()  # follows a file symlink to its target
    if info.st_size > rules.settings.max_file_bytes:
        skipped["too-large"].append(rel)
        return None
    return ScannedFile(rel, Path(entry.path), info.st_size, info.st_mtime_ns)


def read_text_file(abs_path: Path, max_bytes: int, root: Path | None = None
                   ) -> FileContent | str:
    """The file's text, or a reason it is skipped: ``"binary"``, ``"too-large"``, ``"missing"``,
    ``"symlink-outside-root"`` or ``"unreadable: <why>"``. Never raises for a bad file. Given
    the workspace ``root``, the file is read as :func:`~rag_lsp.confined.open_inside` opens
    it: a link put in its place since the scan is not followed out of the workspace.

    Line endings become LF and a UTF-8 BOM is dropped, so line numbers match editors.
    """
    try:
        source = (open_regular(abs_path) if root is None
                  else open_inside(root, abs_path.relative_to(root).as_posix()))
        with source:  # (a FIFO would block a read forever: refused before one)
            if os.fstat(source.fileno()).st_size > max_bytes:
                return "too-large"
            raw = source.read(max_bytes + 1)
    except FileNotFoundError:
        return "missing"  # deleted since it was listed: normal during edits
    except OutsideWorkspaceError:
        return "symlink-outside-root"
    except NotAFileError:
        return "unreadable: not a regular file"
    except OSError as exc:
        log.warning("cannot read %s: %s", abs_path, exc)
        return f"unreadable: {exc.strerror or exc}"
    if len(raw) > max_bytes:  # grew after stat
        return "too-large"
    if b"\0" in raw[:BINARY_SNIFF_BYTES]:
        return "binary"
    body = raw[len(_BOM):] if raw.startswith(_BOM) else raw
    try:
        text, bad = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, bad = body.decode("utf-8", errors="replace"), True
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return FileContent(text, hashlib.sha256(raw).hexdigest(), bad)
