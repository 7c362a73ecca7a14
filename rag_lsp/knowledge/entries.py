"""Knowledge entries as the engine and the wire see them, and the times they carry.

Python objects use snake_case; ``to_dict`` gives the camelCase form clients receive.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from rag_lsp.errors import BadInputError

BUILTIN_MODES = ("debugger", "security", "performance", "planning")

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
TIME_FORMAT_HINT = (
    "an ISO 8601 date or time, e.g. 2026-11-22, 2026-11-22T12:30:05Z or "
    "2026-11-22T13:30:05+01:00 (no offset means UTC)"
)


@dataclass
class AnchorSpec:
    """A range of lines an entry is about, as a caller names it."""

    path: str  # POSIX path relative to the workspace root
    start_line: int  # 1-based, inclusive
    end_line: int  # inclusive, >= start_line


@dataclass
class Anchor:
    """A stored anchor: the range and a hash of its text when it was last seen."""

    path: str
    start_line: int
    end_line: int
    sha256: str  # of the anchored lines joined with "\n"
    # sha256 of the first anchored line: finds candidate positions when lines moved.
    head_sha256: str = ""

    def label(self) -> str:
        return f"{self.path}:L{self.start_line}-L{self.end_line}"

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "sha256": self.sha256,
        }

    def to_json(self) -> dict:
        """The stored form (snake_case, with the head hash)."""
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "sha256": self.sha256,
            "head_sha256": self.head_sha256,
        }

    @classmethod
    def from_json(cls, data: dict) -> Anchor:
        return cls(
            path=data["path"],
            start_line=int(data["start_line"]),
            end_line=int(data["end_line"]),
            sha256=data["sha256"],
            head_sha256=data.get("head_sha256", ""),
        )


@dataclass
class KnowledgeEntry:
    """One note in a mode's knowledge base."""

    id: str  # uuid4 hex
    mode: str
    title: str
    content: str
    tags: list[str]
    session_id: str | None
    created_at: str  # UTC ISO 8601 with "Z"
    anchors: list[Anchor]
    stale: bool  # an anchor's code changed or disappeared
    stale_reason: str | None
    score: float | None = None  # cosine similarity, search results only
    created_us: int = field(default=0, repr=False)  # created_at in µs since the epoch

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "mode": self.mode,
            "title": self.title,
            "content": self.content,
            "tags": list(self.tags),
            "sessionId": self.session_id,
            "createdAt": self.created_at,
            "anchors": [a.to_dict() for a in self.anchors],
            "stale": self.stale,
            "staleReason": self.stale_reason,
            "score": self.score,
        }

    def embedding_text(self) -> str:
        """What gets embedded: the title, the content and the tags."""
        parts = [self.title.strip(), self.content.strip()]
        if self.tags:
            parts.append("tags: " + ", ".join(self.tags))
        return "\n".join(p for p in parts if p)

    def to_row(self, vector: list[float]) -> dict:
        """The table row (see :func:`rag_lsp.knowledge.table.knowledge_schema`)."""
        return {
            "id": self.id,
            "mode": self.mode,
            "title": self.title,
            "content": self.content,
            "tags": list(self.tags),
            "session_id": self.session_id,
            "created_at": self.created_at,
            "created_us": self.created_us,
            "anchors": anchors_to_json(self.anchors),
            "stale": self.stale,
            "stale_reason": self.stale_reason,
            "vector": vector,
        }

    @classmethod
    def from_row(cls, row: dict) -> KnowledgeEntry:
        distance = row.get("_distance")
        return cls(
            id=row["id"],
            mode=row["mode"],
            title=row["title"] or "",
            content=row["content"] or "",
            tags=list(row["tags"] or []),
            session_id=row["session_id"],
            created_at=row["created_at"],
            anchors=anchors_from_json(row["anchors"]),
            stale=bool(row["stale"]),
            stale_reason=row["stale_reason"],
            score=None if distance is None else 1.0 - float(distance),
            created_us=int(row["created_us"]),
        )


def anchors_to_json(anchors: list[Anchor]) -> str:
    return json.dumps([a.to_json() for a in anchors], separators=(",", ":"))


def anchors_from_json(text: str | None) -> list[Anchor]:
    return [Anchor.from_json(a) for a in json.loads(text or "[]")]


# ---- time ------------------------------------------------------------------------------


def as_utc(value: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def to_micros(value: datetime) -> int:
    """Microseconds since the Unix epoch (exact: integer arithmetic)."""
    return (as_utc(value) - _EPOCH) // _MICROSECOND


def format_time(value: datetime) -> str:
    """``2026-11-22T12:30:05.123456Z``."""
    return as_utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime:
    """ISO 8601 text to an aware UTC datetime; without an offset it means UTC.

    Raises :class:`RagLspError` naming the expected format.
    """
    text = value.strip() if isinstance(value, str) else ""
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if not text or parsed is None:
        raise BadInputError(f"cannot read the time {value!r}: expected {TIME_FORMAT_HINT}")
    return as_utc(parsed)
