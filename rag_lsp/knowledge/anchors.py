"""Anchors: ranges of workspace lines an entry is about, hashed so later edits show.

Files are read as UTF-8 (undecodable bytes replaced) with CRLF and a lone CR turned into LF
(:mod:`rag_lsp.lines`), so the hash of a range does not depend on the platform's line
endings. A file's lines are what an editor shows: a final newline does not start another
line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from rag_lsp.confined import read_inside, real_path_inside, resolved
from rag_lsp.errors import BadInputError
from rag_lsp.knowledge.entries import Anchor, AnchorSpec
from rag_lsp.lines import editor_lines


def read_lines(root: Path, rel: str) -> list[str]:
    """The lines of ``root / rel``, a file inside the workspace (:func:`read_inside`)."""
    lines = editor_lines(read_inside(root, rel))
    if lines[-1] == "":
        lines.pop()
    return lines


def hash_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_lines(lines: list[str]) -> str:
    return hash_text("\n".join(lines))


def relative_path(root: Path, path: str) -> str:
    """``path`` as a POSIX path relative to ``root``; absolute paths must lie inside it."""
    if not path or not path.strip():
        raise BadInputError("an anchor needs a file path relative to the workspace root")
    if "\0" in path:
        raise BadInputError(f"anchor path {path!r} holds a NUL character; no file name can")
    candidate = Path(path)
    if candidate.is_absolute():
        for base, target in ((root, candidate),
                             (root.resolve(), resolved(candidate, "anchor path"))):
            try:
                return target.relative_to(base).as_posix()
            except ValueError:
                continue
        raise BadInputError(f"anchor path {path} is outside the workspace root {root}")
    parts = [p for p in PurePosixPath(path).parts if p != "."]
    if not parts or ".." in parts:
        raise BadInputError(
            f"anchor path {path!r} must name a file inside the workspace, relative to its root "
            "(no `..`)"
        )
    return PurePosixPath(*parts).as_posix()


def make_anchor(root: Path, spec: AnchorSpec) -> Anchor:
    """Read the anchored lines now and hash them; raises :class:`RagLspError` naming the
    anchor when the file is missing or the range does not fit it."""
    rel = relative_path(root, spec.path)
    label = f"{rel}:L{spec.start_line}-L{spec.end_line}"
    if spec.start_line < 1 or spec.end_line < spec.start_line:
        raise BadInputError(
            f"anchor {label}: lines are 1-based and the end must not come before the start"
        )
    if real_path_inside(root, rel) is None:
        raise BadInputError(f"anchor {label}: {rel} leads outside the workspace {root} (a "
                            "link), or nowhere (a loop of links); anchor the file inside the "
                            "workspace that it stands for, if any")
    if not (root / rel).is_file():
        raise BadInputError(f"anchor {label}: {rel} does not exist in the workspace {root}")
    try:
        lines = read_lines(root, rel)
    except OSError as exc:
        raise BadInputError(f"anchor {label}: cannot read {rel} ({exc})") from exc
    if spec.end_line > len(lines):
        raise BadInputError(
            f"anchor {label} is beyond the end of {rel}, which has {len(lines)} "
            f"line{'s' if len(lines) != 1 else ''}"
        )
    anchored = lines[spec.start_line - 1 : spec.end_line]
    return Anchor(rel, spec.start_line, spec.end_line, hash_lines(anchored), hash_text(anchored[0]))


@dataclass
class _File:
    lines: list[str]
    line_hashes: list[str] | None = field(default=None)

    def heads(self) -> list[str]:
        if self.line_hashes is None:
            self.line_hashes = [hash_text(line) for line in self.lines]
        return self.line_hashes


class FileCache:
    """Files read during one check, so entries anchored in the same file read it once."""

    def __init__(self, root: Path):
        self.root = root
        self._files: dict[str, _File | None] = {}

    def get(self, rel: str) -> _File | None:
        if rel not in self._files:
            try:  # a file now outside (a link swapped in) no longer exists for the anchor
                self._files[rel] = _File(read_lines(self.root, rel))
            except OSError:
                self._files[rel] = None
        return self._files[rel]


@dataclass
class AnchorCheck:
    anchors: list[Anchor]
    reasons: list[str]  # one per stale anchor

    @property
    def stale_reason(self) -> str | None:
        return "; ".join(self.reasons) or None


def check(anchors: list[Anchor], files: FileCache) -> AnchorCheck:
    """Where each anchor's text is now. Text found at another position (lines were added or
    removed above it) moves the anchor; text not found leaves the anchor as it was (so a
    revert finds it again) and gives a reason."""
    out: list[Anchor] = []
    reasons: list[str] = []
    for anchor in anchors:
        file = files.get(anchor.path)
        if file is None:
            reasons.append(f"{anchor.path} no longer exists")
            out.append(anchor)
            continue
        found = _locate(anchor, file)
        if found is None:
            reasons.append(f"{anchor.label()} changed")
            out.append(anchor)
        else:
            span = anchor.end_line - anchor.start_line
            out.append(replace(anchor, start_line=found, end_line=found + span))
    return AnchorCheck(out, reasons)


def _locate(anchor: Anchor, file: _File) -> int | None:
    """The 1-based start line where the anchored text is now, nearest the old one."""
    lines = file.lines
    count = anchor.end_line - anchor.start_line + 1
    if anchor.end_line <= len(lines):
        if hash_lines(lines[anchor.start_line - 1 : anchor.end_line]) == anchor.sha256:
            return anchor.start_line
    if not anchor.head_sha256:
        return None
    heads = file.heads()
    starts = [
        i + 1
        for i in range(len(lines) - count + 1)
        if heads[i] == anchor.head_sha256 and hash_lines(lines[i : i + count]) == anchor.sha256
    ]
    if not starts:
        return None
    return min(starts, key=lambda s: (abs(s - anchor.start_line), s))
