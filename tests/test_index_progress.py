"""The share of an indexing run reported as done follows the work, not a count of files.

A fake embedder (deterministic vectors, sub-batches like the real one's) keeps these fast;
the chunker, tokenizer and LanceDB store are the real ones.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from rag_lsp.config import Settings
from rag_lsp.indexing.indexer import WRITE_BATCH_CHUNKS, Indexer
from rag_lsp.indexing.progress import IndexProgress
from rag_lsp.store.lance_store import ChunkStore

DIM = 8
SUB_BATCH = 16


class FakeEmbedder:
    """Embeds in sub-batches, calling ``checkpoint`` before and ``embedded`` after each, as
    the real one does; records the percentage reported while each call is under way."""

    def __init__(self) -> None:
        self.calls = 0
        self.inside: list[list[int]] = []  # percentages reported during each call
        self.events: list[IndexProgress] = []
        self._active = False

    def on_progress(self, event: IndexProgress) -> None:
        self.events.append(event)
        if self._active:
            self.inside[-1].append(event.percentage())

    def __call__(self, texts, checkpoint, embedded=None) -> np.ndarray:
        self.calls += 1
        self.inside.append([])
        self._active = True
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        try:
            for start in range(0, len(texts), SUB_BATCH):
                checkpoint()
                for i, text in enumerate(texts[start:start + SUB_BATCH], start=start):
                    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
                    vector = np.random.default_rng(seed).standard_normal(DIM)
                    out[i] = vector / np.linalg.norm(vector)
                if embedded is not None:  # None: an indexer that counts files only
                    embedded(len(texts[start:start + SUB_BATCH]))
        finally:
            self._active = False
        return out


def _functions(count: int, tag: str) -> str:
    return "\n\n".join(
        f'def {tag}_handler_{n}(value):\n    """Handle case {n} of {tag}."""\n'
        f"    return value * {n} + {len(tag)}  # {tag} {n}\n"
        for n in range(count))


def _indexer(root: Path, index_dir: Path, token_counter, embed: FakeEmbedder) -> Indexer:
    store = ChunkStore(index_dir, DIM, create=not index_dir.exists())
    return Indexer(root, Settings.from_dict({}), store, embed, token_counter, index_dir)


def _percentages(events: list[IndexProgress]) -> list[int]:
    return [e.percentage() for e in events]


def test_the_first_write_batch_moves_the_percentage(tmp_path, token_counter):
    """A large first index: the first write batch is a few big files out of many. Counting
    files, the figure sat at 0% while that batch was embedded (tens of seconds with the real
    model); counting the work, it moves with every sub-batch."""
    root = tmp_path / "repo"
    (root / "big").mkdir(parents=True)
    for n in range(2):
        (root / "big" / f"module_{n}.py").write_text(_functions(300, f"big{n}"))
    (root / "small").mkdir()
    for n in range(300):
        (root / "small" / f"note_{n:03}.txt").write_text(f"note {n}: water the plants.\n")
    embed = FakeEmbedder()
    report = _indexer(root, tmp_path / "index", token_counter, embed).run(embed.on_progress)
    assert report.files_indexed == 302 and embed.calls >= 2
    first = embed.inside[0]
    assert len(first) >= WRITE_BATCH_CHUNKS // SUB_BATCH - 1
    assert first[-1] > 0, first  # moves during the first batch (was 0 throughout)
    assert len(set(first)) > 3, first  # and keeps moving, sub-batch by sub-batch
    steps = _percentages(embed.events)
    assert steps == sorted(steps), steps  # never backwards
    assert max(steps) == 99 and embed.events[-1].phase == "finish"


def test_unchanged_files_count_as_done_and_the_changed_big_file_is_the_work(
        tmp_path, token_counter):
    """Many unchanged files and one big changed file: the run is not "99%" once the cheap
    unchanged files are past; the big file's embedding is what the figure follows."""
    root = tmp_path / "repo"
    (root / "notes").mkdir(parents=True)
    for n in range(200):
        (root / "notes" / f"note_{n:03}.txt").write_text(f"note {n}: feed the cat.\n")
    big = root / "zz_big.py"  # sorted last: seen after every unchanged file
    big.write_text(_functions(10, "small"))
    _indexer(root, tmp_path / "index", token_counter, FakeEmbedder()).run()

    big.write_text(_functions(300, "grown"))
    os.utime(big, ns=(1, 1))  # a different mtime whatever the clock's resolution
    embed = FakeEmbedder()
    report = _indexer(root, tmp_path / "index", token_counter, embed).run(embed.on_progress)
    assert report.files_unchanged == 200 and report.files_indexed == 1
    inside = [p for call in embed.inside for p in call]
    assert inside[0] < 20, inside  # was 99: 200 of 201 files already "done"
    assert inside[-1] > 80 and len(set(inside)) > 5, inside
    steps = _percentages(embed.events)
    assert steps == sorted(steps), steps


@pytest.mark.parametrize(("done", "total", "expected"), [(0, 100, 0), (50, 100, 50),
                                                         (100, 100, 99), (120, 100, 99)])
def test_percentage_by_work_stops_at_99(done, total, expected):
    event = IndexProgress("index", 1, 10, work_done=done, work_total=total)
    assert event.percentage() == expected
    assert IndexProgress("finish").percentage() == 99


def test_describe_says_files_and_chunks_and_the_note():
    event = IndexProgress("index", 412, 1000, 3100, note="searches use the current index")
    assert event.describe() == ("412 of 1,000 files, 3,100 chunks embedded; "
                                "searches use the current index")
