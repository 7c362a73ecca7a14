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
    """What one compaction took, in seconds: in all, and of that the ANN index's training
    with the compaction after it, which rewrites every row (``None`` when the index was not
    trained: also when a child training it was ended unfinished, whose time is in
    ``seconds``, and the retraining module's warning says so)."""

    seconds: float
    training_seconds: float | None = None

    def describe(self) -> str:
        """E.g. ``index compacted in 7700 ms (of which the vector index's training and the
        rewrite after it: 6310 ms)``."""
        trained = ("" if self.training_seconds is None else
                   " (of which the vector index's training and the rewrite after it: "
                   f"{self.training_seconds * 1000:.0f} ms)")
        return f"index compacted in {self.seconds * 1000:.0f} ms{trained}"
