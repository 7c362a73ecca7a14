"""Packing context items into a token budget, and rendering them as Markdown.

Counts come from a real tokenizer (the embedding model's word-pieces; counts are additive
across lines, so a block's count does not depend on its neighbours). The chat model's own
tokenizer differs, so :data:`SAFETY_MARGIN` of every budget is kept free. Items are
whole or absent — a chunk is never cut — and an item overlapping one already packed (same
file, overlapping lines) is skipped as a duplicate.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SAFETY_MARGIN = 0.10  # share of the budget left unused, for tokenizer differences
SOURCES = ("manual", "knowledge", "codebase")


@dataclass
class ContextItem:
    source: str  # "manual" | "knowledge" | "codebase"
    title: str
    text: str
    path: str = ""  # relative to ``root``; empty for knowledge without anchors
    root: Path | None = None
    start_line: int | None = None  # 1-based, inclusive
    end_line: int | None = None
    language: str = ""
    score: float | None = None
    created_at: str | None = None  # knowledge
    entry_id: str | None = None  # knowledge
    note: str = ""  # a line shown under the heading (anchors, staleness)
    tokens: int = 0

    @property
    def where(self) -> str:
        if not self.path:
            return ""
        if self.start_line is None:
            return self.path
        return f"{self.path}:L{self.start_line}-L{self.end_line}"

    def overlaps(self, other: ContextItem) -> bool:
        if self.entry_id is not None or other.entry_id is not None:
            return self.entry_id == other.entry_id
        if not self.path or self.path != other.path or self.root != other.root:
            return False
        if self.start_line is None or other.start_line is None:
            return True  # a whole file overlaps anything in it
        return self.start_line <= other.end_line and other.start_line <= self.end_line


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def render(item: ContextItem) -> str:
    """One Markdown block: a heading naming the source, then the code or the note."""
    heading = f"### {item.source}: {item.title or item.where}"
    details = [d for d in (
        item.where if item.title and item.where else "",
        f"score {item.score:.2f}" if item.score is not None else "",
        item.created_at or "",
    ) if d]
    if details:
        heading += " (" + ", ".join(details) + ")"
    lines = [heading]
    if item.note:
        lines.append(f"_{item.note}_")
    if item.source == "knowledge":
        lines.append(item.text)
    else:
        fence = _fence(item.text)
        lines += [f"{fence}{item.language} {item.where}".rstrip(), item.text, fence]
    return "\n".join(lines)


@dataclass
class Dropped:
    item: ContextItem
    reason: str  # "budget" | "duplicate"


@dataclass
class Packer:
    """Adds items in order of precedence while they fit."""

    budget: int
    count: Callable[[str], int]
    items: list[ContextItem] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    used: int = 0

    @property
    def limit(self) -> int:
        return int(self.budget * (1 - SAFETY_MARGIN))

    def measure(self, item: ContextItem) -> int:
        item.tokens = self.count(render(item))
        return item.tokens

    def is_duplicate(self, item: ContextItem) -> bool:
        return any(item.overlaps(kept) for kept in self.items)

    def fits(self, item: ContextItem) -> bool:
        return self.used + self.measure(item) <= self.limit

    def add(self, item: ContextItem) -> bool:
        """Pack ``item`` if it is new and fits; otherwise record why not."""
        if self.is_duplicate(item):
            self.dropped.append(Dropped(item, "duplicate"))
            return False
        if not self.fits(item):
            self.dropped.append(Dropped(item, "budget"))
            return False
        self.items.append(item)
        self.used += item.tokens
        return True

    def context(self) -> str:
        return "\n\n".join(render(item) for item in self.items)
