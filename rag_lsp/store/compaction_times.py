"""How long a compaction of an index took, and of that how long the ANN index's training.

A run folds its new rows into the indexes every few batches (past 50k chunks after each one)
and now and then trains the ANN index again. Those are the server's heaviest steps, and the
searches beside them its slowest: the server logs each one, so that a user who sees the CPU
busy, or a bench that times searches, can tell when they ran.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompactionTimes:
    """What one ``ChunkStore.optimize`` took, in seconds: in all, and of that the ANN index's
    training with the compaction after it (``None`` when it was not trained again)."""

    seconds: float
    training_seconds: float | None = None

    def describe(self) -> str:
        """E.g. ``index compacted in 7700 ms (the vector index trained again: 6310 ms)``."""
        trained = ("" if self.training_seconds is None else
                   f" (the vector index trained again: {self.training_seconds * 1000:.0f} ms)")
        return f"index compacted in {self.seconds * 1000:.0f} ms{trained}"
