"""Per-mode knowledge bases: notes an assistant or a person keeps about a workspace,
searchable by meaning and anchored to lines of code that are re-checked as files change.

All modes share one table (see :mod:`rag_lsp.knowledge.table`), created by the first
:meth:`KnowledgeBase.add`. Which modes exist is the caller's business; any non-empty name
works (:data:`~rag_lsp.knowledge.entries.BUILTIN_MODES` are the usual ones).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from rag_lsp.errors import BadInputError, ModelNotFoundError, RagLspError
from rag_lsp.knowledge.anchors import FileCache, check, make_anchor, relative_path
from rag_lsp.knowledge.entries import AnchorSpec, KnowledgeEntry, as_utc, format_time, to_micros
from rag_lsp.knowledge.table import COLUMNS, KnowledgeTable
from rag_lsp.store.sql import all_of, quote

log = logging.getLogger(__name__)

Embed = Callable[[list[str]], np.ndarray]


class KnowledgeBase:
    """Knowledge entries of every mode for one workspace.

    ``embed`` turns texts into L2-normalised vectors of ``dimension`` floats. Without it
    (``None``: the model is not available) entries can be listed, deleted and cleared but
    not added or searched. Safe to share between threads; entries other processes add are
    seen on the next call.
    """

    def __init__(self, index_dir: Path, root: Path, embed: Embed | None, dimension: int):
        self.index_dir = Path(index_dir)
        self.root = Path(root)
        self.dimension = dimension
        self._embed = embed
        self._table = KnowledgeTable(self.index_dir, dimension)

    @property
    def degraded(self) -> bool:
        """True when entries cannot be added or searched (no model)."""
        return self._embed is None

    def add(
        self,
        mode: str,
        content: str,
        *,
        title: str = "",
        tags: Sequence[str] = (),
        session_id: str | None = None,
        anchors: Sequence[AnchorSpec] = (),
        now: datetime | None = None,
    ) -> KnowledgeEntry:
        """Store a new entry and return it; it is committed to disk before this returns.

        Anchors are read and hashed now: a missing file or a range past its end raises
        :class:`RagLspError` naming the anchor and the file's line count. ``now`` (default:
        the current time; naive means UTC) is the entry's creation time.
        """
        _check_mode(mode)
        if not content or not content.strip():
            raise BadInputError("a knowledge entry needs some content")
        embed = self._require_embed("add knowledge entries")
        if not self.root.is_dir():  # saving would make the folder again, around one file
            raise RagLspError(f"the workspace folder {self.root} no longer exists; nothing was "
                              "saved. Open the folder where it is now.")
        self._table.check_dimension()
        when = as_utc(now) if now is not None else datetime.now(timezone.utc)
        entry = KnowledgeEntry(
            id=uuid.uuid4().hex,
            mode=mode,
            title=title.strip(),
            content=content,
            tags=_clean_tags(tags),
            session_id=session_id or None,
            created_at=format_time(when),
            anchors=[make_anchor(self.root, spec) for spec in anchors],
            stale=False,
            stale_reason=None,
            created_us=to_micros(when),
        )
        self._table.insert(entry.to_row(self._vector(embed, entry.embedding_text())))
        return entry

    def search(
        self,
        mode: str,
        query: str,
        *,
        top_k: int = 10,
        threshold: float = 0.2,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[KnowledgeEntry]:
        """Entries of ``mode`` closest in meaning to ``query`` (cosine >= ``threshold``),
        best first; of entries equally relevant to two decimals the newer comes first.
        ``since``/``until`` bound the creation time, both inclusive. Anchors are re-checked
        (see :meth:`check_anchors`)."""
        _check_mode(mode)
        if not query or not query.strip():
            raise BadInputError("the knowledge search query is empty; pass some words to look for")
        if top_k < 1:
            raise BadInputError(f"top_k must be at least 1 (got {top_k})")
        if not -1 <= threshold <= 1:  # a cosine; NaN fails this too
            raise BadInputError(f"the knowledge threshold is a cosine similarity, a number "
                                f"from -1 to 1 (got {threshold})")
        where = _where(mode, since, until)
        embed = self._require_embed("search knowledge")
        if not self._table.exists():
            return []
        self._table.check_dimension()
        entries = self._table.nearest(self._vector(embed, query), where, top_k, threshold)
        entries.sort(key=lambda e: (-round(e.score or 0.0, 2), -e.created_us, e.id))
        return self.check_anchors(entries[:top_k])

    def list(
        self,
        mode: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[KnowledgeEntry], int]:
        """A page of ``mode``'s entries, newest first, and how many match in all.
        Anchors are re-checked (see :meth:`check_anchors`)."""
        _check_mode(mode)
        if limit < 1 or offset < 0:
            raise BadInputError(f"limit must be >= 1 and offset >= 0 (got {limit}, {offset})")
        keys = self._table.rows(_where(mode, since, until), ["id", "created_us"])
        keys.sort(key=lambda r: (-r["created_us"], r["id"]))
        page_ids = [r["id"] for r in keys[offset : offset + limit]]
        rows = {r["id"]: r for r in self._table.rows_for_ids(page_ids)}
        # An entry deleted between the two reads is left out.
        page = [KnowledgeEntry.from_row(rows[i]) for i in page_ids if i in rows]
        return self.check_anchors(page), len(keys)

    def delete(self, mode: str, entry_id: str) -> bool:
        """Remove one entry; ``False`` if ``mode`` has no entry with that id."""
        _check_mode(mode)
        where = all_of(f"mode = {quote(mode)}", f"id = {quote(entry_id)}")
        return self._table.delete(where) > 0

    def clear(self, mode: str) -> int:
        """Remove every entry of ``mode``; returns how many there were."""
        _check_mode(mode)
        return self._table.delete(f"mode = {quote(mode)}")

    def check_anchors(self, entries: list[KnowledgeEntry]) -> list[KnowledgeEntry]:
        """The entries as the files are now; changes are saved.

        An anchor whose exact text is found at another position (lines added or removed
        above it) moves there and stays fresh; of several copies the nearest wins. Text
        changed or gone, or the file gone, makes the entry stale with a reason. A stale
        anchor keeps its old range and hash, so an entry whose text comes back (a revert)
        is fresh again. Entries are never deleted for being stale.
        """
        return self._check(entries)[0]

    def stale_for_paths(self, paths: Sequence[str]) -> int:
        """Re-check entries anchored in these files or folders (workspace-relative or
        absolute; after file events). Returns how many entries changed: stale flag,
        reason or anchor ranges."""
        rels = []
        for path in paths:
            try:
                rels.append(relative_path(self.root, str(path)))
            except RagLspError:
                continue  # outside the workspace: no anchor names it
        if not rels:
            return 0
        entries = [KnowledgeEntry.from_row(r) for r in self._table.rows("anchors != '[]'", COLUMNS)]
        hit = [e for e in entries if any(_under(a.path, rels) for a in e.anchors)]
        return len(self._check(hit)[1])

    def optimize(self) -> None:
        """Compact the table (each write adds a small file); also done every 100 writes."""
        self._table.optimize()

    # ---- internals -----------------------------------------------------------------------

    def _require_embed(self, action: str) -> Embed:
        if self._embed is None:
            raise ModelNotFoundError(
                f"cannot {action}: that needs the embedding model, which is not loaded. Run "
                "`rag-lsp model install` (offline) or set `modelDir`, then restart. Listing, "
                "deleting and clearing entries work without it."
            )
        return self._embed

    def _vector(self, embed: Embed, text: str) -> list[float]:
        vectors = np.asarray(embed([text]), dtype=np.float32)
        if vectors.shape != (1, self.dimension):
            raise RagLspError(
                f"the embedding model returned vectors of shape {vectors.shape}; the knowledge "
                f"base expects {self.dimension} dimensions"
            )
        return vectors[0].tolist()

    def _check(self, entries: list[KnowledgeEntry]) -> tuple[list, list]:
        """(all entries as they are now, the ones whose stored state changed)."""
        files = FileCache(self.root)
        out: list[KnowledgeEntry] = []
        changed: list[KnowledgeEntry] = []
        for entry in entries:
            if entry.anchors:
                result = check(entry.anchors, files)
                now = replace(
                    entry,
                    anchors=result.anchors,
                    stale=bool(result.reasons),
                    stale_reason=result.stale_reason,
                )
                if (now.anchors, now.stale, now.stale_reason) != (
                    entry.anchors, entry.stale, entry.stale_reason,
                ):
                    changed.append(now)
                entry = now
            out.append(entry)
        if changed:
            try:
                self._table.save_checks(changed)
            except (RagLspError, ValueError) as exc:
                # The answer is right either way; the next check tries to save again.
                log.warning("could not save re-checked anchors: %s", exc)
        return out, changed


def _check_mode(mode: str) -> None:
    if not isinstance(mode, str) or not mode.strip():
        raise BadInputError("a knowledge mode is required (e.g. `debugger`)")


def _clean_tags(tags: Sequence[str]) -> list[str]:
    """Stripped, without blanks or repeats, in the given order."""
    if isinstance(tags, str):
        tags = [tags]
    kept: dict[str, None] = {}
    for tag in tags:
        if str(tag).strip():
            kept.setdefault(str(tag).strip(), None)
    return list(kept)


def _where(mode: str, since: datetime | None, until: datetime | None) -> str | None:
    if since is not None and until is not None and as_utc(since) > as_utc(until):
        raise BadInputError(
            f"the time window is empty: since ({format_time(since)}) is after until "
            f"({format_time(until)})"
        )
    return all_of(
        f"mode = {quote(mode)}",
        f"created_us >= {to_micros(since)}" if since is not None else None,
        f"created_us <= {to_micros(until)}" if until is not None else None,
    )


def _under(path: str, targets: list[str]) -> bool:
    return any(path == t or path.startswith(t + "/") for t in targets)
