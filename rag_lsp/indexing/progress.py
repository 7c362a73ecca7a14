"""What an indexing run reports while it runs (progress) and when it ends (report).

Kept apart from the indexer so that front ends (the CLI's progress bar, the servers' status)
can name these without importing the storage engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class IndexProgress:
    """Where an indexing run is; handed to the progress callback after each step.

    ``work_done`` / ``work_total`` measure the run by the bytes of the files that need work
    (their size or mtime changed): an unchanged file costs nothing and counts as done at
    once, and a changed file's bytes are credited as its chunks go through the model, so
    the share moves with the time the run really takes, not with a count of files.
    """

    # "wait" (for another writer) | "scan" | "draft" (new files made searchable by their
    # words, see rag_lsp.store.draft) | "index" | "finish"
    phase: str
    files_done: int = 0
    files_total: int = 0
    chunks_embedded: int = 0
    message: str = ""
    work_done: float = 0.0
    work_total: int = 0
    note: str = ""  # said with every step (e.g. that searches use the current index)

    def percentage(self) -> int:
        """Share of the run done, 0..99 (100 is for a finished run)."""
        if self.phase == "finish":
            return 99
        if self.phase != "index":
            return 0
        if self.work_total:
            return min(99, int(100 * self.work_done / self.work_total))
        if not self.files_total:
            return 0
        return min(99, int(100 * self.files_done / self.files_total))  # nothing to embed

    def describe(self) -> str:
        if self.phase == "index":
            text = (f"{self.files_done:,} of {self.files_total:,} files, "
                    f"{self.chunks_embedded:,} chunks embedded")
        else:
            text = self.message or self.phase
        return f"{text}; {self.note}" if self.note else text


@dataclass
class IndexReport:
    files_scanned: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_skipped: dict[str, int] = field(default_factory=dict)
    chunks_total: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0  # by the model, in this run
    chunks_reused: int = 0  # vector already in this index (an unchanged chunk, a rename)
    chunks_cached: int = 0  # vector from the shared cache (another branch, worktree, clone)
    seconds: float = 0.0
    rebuilt_because: str = ""  # the damage that made this run rebuild the index from scratch

    def summary(self) -> str:
        rebuilt = (f"the index was damaged and has been rebuilt ({self.rebuilt_because}); "
                   if self.rebuilt_because else "")
        cached = (f" ({self.chunks_cached} more from the shared cache)"
                  if self.chunks_cached else "")
        return (f"{rebuilt}{self.files_scanned} files scanned, {self.files_indexed} indexed, "
                f"{self.files_removed} removed, {self.chunks_embedded} chunks embedded{cached}, "
                f"{self.chunks_total} chunks in the index ({self.seconds:.1f} s)")

    def skip(self, reason: str, count: int = 1) -> None:
        key = reason.split(":", 1)[0]
        self.files_skipped[key] = self.files_skipped.get(key, 0) + count


ProgressCallback = Callable[[IndexProgress], None]
