"""What an indexing run reports while it runs (progress) and when it ends (report).

Kept apart from the indexer so that front ends (the CLI's progress bar, the servers' status)
can name these without importing the storage engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class IndexProgress:
    """Where an indexing run is; handed to the progress callback after each step."""

    phase: str  # "wait" (for another writer) | "scan" | "index" | "finish"
    files_done: int = 0
    files_total: int = 0
    chunks_embedded: int = 0
    message: str = ""

    def percentage(self) -> int:
        """Share of the run done, 0..99 (100 is for a finished run)."""
        if self.phase == "finish":
            return 99
        if not self.files_total:
            return 0
        return min(99, int(100 * self.files_done / self.files_total))

    def describe(self) -> str:
        if self.phase == "index":
            return (f"{self.files_done}/{self.files_total} files, "
                    f"{self.chunks_embedded} chunks embedded")
        return self.message or self.phase


@dataclass
class IndexReport:
    files_scanned: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_skipped: dict[str, int] = field(default_factory=dict)
    chunks_total: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    seconds: float = 0.0
    rebuilt_because: str = ""  # the damage that made this run rebuild the index from scratch

    def summary(self) -> str:
        rebuilt = (f"the index was damaged and has been rebuilt ({self.rebuilt_because}); "
                   if self.rebuilt_because else "")
        return (f"{rebuilt}{self.files_scanned} files scanned, {self.files_indexed} indexed, "
                f"{self.files_removed} removed, {self.chunks_embedded} chunks embedded, "
                f"{self.chunks_total} chunks in the index ({self.seconds:.1f} s)")

    def skip(self, reason: str, count: int = 1) -> None:
        key = reason.split(":", 1)[0]
        self.files_skipped[key] = self.files_skipped.get(key, 0) + count


ProgressCallback = Callable[[IndexProgress], None]
