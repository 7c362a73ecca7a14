"""The index manifest: which model and schema wrote an index, so vectors are never mixed."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from rag_lsp.errors import IndexCorruptError, IndexMismatchError
from rag_lsp.store.private import private_dir, write_private

# Bumped whenever chunk boundaries, embedded text or table columns change; an index of an
# older version is rebuilt by the next indexing run. 2: contextual chunk headers. (Not for
# a column an index can be given in place, as the packed fields were: see
# ChunkStore.ensure_packed_column.)
SCHEMA_VERSION = 2
MANIFEST_NAME = "manifest.json"
REBUILD_HINT = "Run `rag-lsp index --full` to rebuild the index from the workspace."


def without_rebuild_hint(message: str) -> str:
    """``message`` without :data:`REBUILD_HINT`, for a caller already rebuilding."""
    return message.replace(REBUILD_HINT, "").strip()


@dataclass
class IndexManifest:
    schema_version: int
    model_id: str
    model_sha256: str
    dimension: int
    created_at: str
    last_indexed_at: str | None = None
    chunking: dict | None = None  # chunk size settings the chunks were made with

    @classmethod
    def read(cls, index_dir: Path) -> IndexManifest | None:
        path = index_dir / MANIFEST_NAME
        if not path.exists():
            return None
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as exc:
            raise IndexCorruptError(
                f"index manifest {path} is unreadable ({exc}). {REBUILD_HINT}"
            ) from exc

    def write(self, index_dir: Path) -> None:
        # Write-then-rename: a crash mid-write never leaves a half manifest.
        private_dir(index_dir)
        tmp = index_dir / (MANIFEST_NAME + ".tmp")
        write_private(tmp, json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, index_dir / MANIFEST_NAME)

    def check_compatible(self, index_dir: Path, model_id: str, model_sha256: str, dim: int):
        """Raise :class:`IndexMismatchError` naming both sides and the fix."""
        if self.schema_version != SCHEMA_VERSION:
            raise IndexMismatchError(
                f"index at {index_dir} has format {self.schema_version}; this rag-lsp writes "
                f"format {SCHEMA_VERSION}. The next `rag-lsp index` rebuilds it (the language "
                "server does so by itself when it opens the folder)."
            )
        same_hash = not model_sha256 or not self.model_sha256 or model_sha256 == self.model_sha256
        if self.model_id != model_id or self.dimension != dim or not same_hash:
            raise IndexMismatchError(
                f"index at {index_dir} was written by model {self.model_id} "
                f"(sha256 {self.model_sha256[:12]}…, dims {self.dimension}); this server uses "
                f"{model_id} (sha256 {model_sha256[:12]}…, dims {dim}). {REBUILD_HINT}"
            )
