"""Chunk ids: ``path#L<first line>-<content hash, 12 hex digits>`` (and ``.<n>`` for the n-th
identical piece of one long line). So an unchanged chunk keeps its id, and its row, across
re-indexing, and a chunk's content can be told from its id alone (the draft of a changed file
recognises its stored chunks by it, whichever version of the table a search reads: see
rag_lsp.store.draft)."""

from __future__ import annotations

HASH_DIGITS = 12


class ChunkIds:
    """Chunk ids of one file. Unique within the file, which the store's replace-by-id needs:
    identical pieces of one long line get a suffix."""

    def __init__(self, path: str):
        self._path = path
        self._seen: set[str] = set()

    def next(self, start_line: int, content_hash: str) -> str:
        base = f"{self._path}#L{start_line}-{content_hash[:HASH_DIGITS]}"
        chunk_id, repeat = base, 1
        while chunk_id in self._seen:
            repeat += 1
            chunk_id = f"{base}.{repeat}"
        self._seen.add(chunk_id)
        return chunk_id


def content_key(chunk_id: str) -> str:
    """What a chunk id says of the chunk's content (the start of its content hash: the hash of
    what the model reads, header, context and text): the same for every chunk of a file with
    that content, wherever it starts."""
    return chunk_id.rpartition("-")[2].partition(".")[0]
