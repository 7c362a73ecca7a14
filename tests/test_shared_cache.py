"""The embedding cache shared by the user's workspaces: branch switches, second worktrees and
fresh clones embed only chunks whose text is new; a damaged or unusable cache costs time,
never a result."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_lsp.config import Settings, validate_settings
from rag_lsp.embedding import shared_cache
from rag_lsp.embedding.shared_cache import EmbeddingCache, user_cache_dir
from rag_lsp.workspace import Workspace

from .conftest import make_sample_root

DIM = 4


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def small_cache(path: Path, rows: int = 1000) -> EmbeddingCache:
    return EmbeddingCache(path, DIM, rows * (DIM * 4 + shared_cache.ROW_OVERHEAD_BYTES))


# ---- the cache itself ------------------------------------------------------------------------


def test_a_vector_put_is_got_back_exactly_and_unknown_texts_are_misses(tmp_path):
    cache = small_cache(tmp_path / "c.sqlite3")
    cache.put([(digest("a"), vector(1)), (digest("b"), vector(2))])
    found = cache.get([digest("a"), digest("b"), digest("never stored")])
    assert set(found) == {digest("a"), digest("b")}
    np.testing.assert_array_equal(found[digest("a")], vector(1))
    assert found[digest("a")].dtype == np.float32


def test_another_connection_to_the_file_sees_the_vectors(tmp_path):
    """Two processes (here: two connections) share the file."""
    small_cache(tmp_path / "c.sqlite3").put([(digest("a"), vector(1))])
    other = small_cache(tmp_path / "c.sqlite3")
    np.testing.assert_array_equal(other.get([digest("a")])[digest("a")], vector(1))


def test_past_the_cap_the_least_recently_used_vectors_go(tmp_path, monkeypatch):
    clock = iter(range(1_000, 2_000))
    monkeypatch.setattr(shared_cache.time, "time", lambda: next(clock))
    cache = small_cache(tmp_path / "c.sqlite3", rows=10)
    for i in range(10):  # one by one: t0 oldest, t9 newest
        cache.put([(digest(f"t{i}"), vector(i))])
    cache.get([digest("t0")])  # used again: now the most recent
    cache.put([(digest("new"), vector(99))])  # 11 > 10: evict down to 9
    assert cache.rows() == 9
    left = cache.get([digest(f"t{i}") for i in range(10)] + [digest("new")])
    assert digest("t0") in left and digest("new") in left
    assert digest("t1") not in left and digest("t2") not in left  # the oldest two


def test_a_damaged_vector_is_a_miss_and_is_dropped(tmp_path, caplog):
    path = tmp_path / "c.sqlite3"
    cache = small_cache(path)
    cache.put([(digest("a"), vector(1)), (digest("b"), vector(2))])
    cache.close()
    with sqlite3.connect(path) as db:  # a flipped byte in one stored vector
        blob = bytearray(db.execute("SELECT vector FROM vectors WHERE key = ?",
                                    (bytes.fromhex(digest("a")),)).fetchone()[0])
        blob[0] ^= 0xFF
        db.execute("UPDATE vectors SET vector = ? WHERE key = ?",
                   (bytes(blob), bytes.fromhex(digest("a"))))
    with caplog.at_level(logging.WARNING):
        found = small_cache(path).get([digest("a"), digest("b")])
    assert set(found) == {digest("b")}
    assert "1 damaged vectors dropped" in caplog.text
    assert small_cache(path).rows() == 1


def test_a_file_that_is_not_a_database_is_started_afresh(tmp_path, caplog):
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"garbage, not SQLite" * 100)
    cache = small_cache(path)
    with caplog.at_level(logging.WARNING):
        cache.put([(digest("a"), vector(1))])
    assert "is damaged" in caplog.text and "starting it afresh" in caplog.text
    assert set(cache.get([digest("a")])) == {digest("a")}


def test_a_busy_cache_is_left_alone_and_tried_again_later(tmp_path, caplog, monkeypatch):
    """Another process holding the write lock past the timeout is not damage: the file and
    its vectors stay, this batch goes without, and a later batch uses the cache again."""
    monkeypatch.setattr(shared_cache, "BUSY_TIMEOUT_MS", 100)
    path = tmp_path / "c.sqlite3"
    small_cache(path).put([(digest("a"), vector(1))])
    other = sqlite3.connect(path)
    other.execute("BEGIN EXCLUSIVE")  # another process, mid-write
    cache = small_cache(path)
    with caplog.at_level(logging.WARNING):
        assert cache.get([digest("a")]) == {}
    assert "not usable" in caplog.text and "damaged" not in caplog.text
    other.rollback()
    other.close()
    assert small_cache(path).rows() == 1  # nothing was deleted
    monkeypatch.setattr(shared_cache, "RETRY_SECONDS", 0.0)
    assert set(cache.get([digest("a")])) == {digest("a")}


def test_a_cache_that_turns_busy_while_in_use_costs_a_batch_its_vectors_not_an_error(
        tmp_path, caplog, monkeypatch):
    """The same once the cache is open: another process takes the write lock between two
    batches. A read or a write then goes without the cache (no exception reaches the
    indexer), which is tried again later."""
    monkeypatch.setattr(shared_cache, "BUSY_TIMEOUT_MS", 100)
    path = tmp_path / "c.sqlite3"
    reading, writing = small_cache(path), small_cache(path)  # one for each operation
    writing.put([(digest("a"), vector(1))])
    assert set(reading.get([digest("a")])) == {digest("a")}
    other = sqlite3.connect(path)
    other.execute("BEGIN EXCLUSIVE")
    with caplog.at_level(logging.WARNING):
        writing.put([(digest("b"), vector(2))])
        assert reading.get([digest("a")]) == {}
    assert caplog.text.count("not usable") == 2 and "damaged" not in caplog.text
    other.rollback()
    other.close()
    monkeypatch.setattr(shared_cache, "RETRY_SECONDS", 0.0)
    writing.put([(digest("b"), vector(2))])
    assert set(reading.get([digest("a"), digest("b")])) == {digest("a"), digest("b")}


def test_other_writers_count_towards_the_cap(tmp_path):
    mine, theirs = (small_cache(tmp_path / "c.sqlite3", rows=10) for _ in range(2))
    mine.put([(digest("first"), vector(0))])  # mine has counted the rows
    theirs.put([(digest(f"t{i}"), vector(i)) for i in range(9)])
    mine.put([(digest("one more"), vector(99))])  # 11 rows in the file, not 2
    assert mine.rows() <= 10


def test_evicted_space_goes_back_to_the_file_system(tmp_path):
    path = tmp_path / "c.sqlite3"
    cache = EmbeddingCache(path, 384, 4 << 20)  # room for ~2,400 vectors of 384 floats
    for batch in range(12):
        cache.put([(digest(f"{batch}-{i}"), np.ones(384, np.float32)) for i in range(500)])
    cache.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA freelist_count").fetchone()[0] < 8
    assert path.stat().st_size < 5 << 20


def test_an_unusable_folder_turns_the_cache_off_with_one_message(tmp_path, caplog):
    blocker = tmp_path / "a file"
    blocker.write_text("where the cache folder should be")
    cache = small_cache(blocker / "c.sqlite3")
    with caplog.at_level(logging.WARNING):
        cache.put([(digest("a"), vector(1))])
        assert cache.get([digest("a")]) == {}
        cache.put([(digest("b"), vector(2))])
    assert caplog.text.count("is not usable") == 1
    assert "embeddingCache" in caplog.text  # says how to switch it off


def test_the_cache_folder_follows_the_environment_and_the_platform(monkeypatch, tmp_path):
    monkeypatch.setenv(shared_cache.CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert user_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(shared_cache.CACHE_DIR_ENV)
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert user_cache_dir() == tmp_path / "xdg" / "rag-lsp"


def test_a_file_per_model_weights_and_tokenizer(tmp_path):
    model = "sentence-transformers/all-MiniLM-L6-v2"
    a = shared_cache.cache_file(tmp_path, model, "ab" * 32, "ef" * 32)
    b = shared_cache.cache_file(tmp_path, model, "cd" * 32, "ef" * 32)
    c = shared_cache.cache_file(tmp_path, model, "ab" * 32, "01" * 32)
    assert len({a, b, c}) == 3 and a.parent == tmp_path / "embeddings" and "/" not in a.name


# ---- indexing with the real model --------------------------------------------------------------


def open_ws(root: Path, embedder, **settings) -> Workspace:
    return Workspace.open(root, Settings.from_dict({"indexPath": str(root / ".idx"),
                                                    **settings}), embedder=embedder)


def test_a_second_copy_of_a_workspace_embeds_nothing_and_searches_the_same(tmp_path, embedder):
    first = open_ws(make_sample_root(tmp_path / "one"), embedder)
    report = first.index()
    assert report.chunks_embedded > 0 and report.chunks_cached == 0
    clone = open_ws(make_sample_root(tmp_path / "two"), embedder)  # a worktree, a clone
    again = clone.index()
    assert again.chunks_embedded == 0
    assert again.chunks_cached == report.chunks_embedded
    assert "more from the shared cache" in again.summary()
    query = "where are redirects followed?"
    mine, theirs = first.search(query).results, clone.search(query).results
    assert [(r.path, r.score) for r in mine] == [(r.path, r.score) for r in theirs]
    assert mine[0].path == "src/http/client.py"


def switch_branch_and_back(root: Path, ws: Workspace) -> int:
    """Edit a file (another branch), index, restore it (back), index: chunks embedded back."""
    target = root / "src/cache/lru.py"
    original = target.read_text()
    target.write_text(original.replace("Keeps the most recently used entries",
                                       "Holds the newest entries"))
    assert ws.index().chunks_embedded > 0
    target.write_text(original)
    return ws.index().chunks_embedded


def test_switching_back_to_a_branch_embeds_nothing_with_the_cache(tmp_path, embedder):
    root = make_sample_root(tmp_path / "ws")
    ws = open_ws(root, embedder)
    ws.index()
    assert switch_branch_and_back(root, ws) == 0


def test_without_the_cache_switching_back_embeds_again(tmp_path, embedder):
    root = make_sample_root(tmp_path / "ws")
    ws = open_ws(root, embedder, embeddingCache=False)
    ws.index()
    assert switch_branch_and_back(root, ws) > 0
    assert not (user_cache_dir() / "embeddings").exists()  # nothing written either
    assert ws.status().embedding_cache is None


def test_status_names_the_cache_file(tmp_path, embedder):
    ws = open_ws(make_sample_root(tmp_path / "ws"), embedder)
    path = Path(ws.status().to_dict()["embedding_cache"])
    assert path.parent == user_cache_dir() / "embeddings" and path.suffix == ".sqlite3"
    assert embedder.model_sha256[:16] in path.name


def test_another_process_reuses_the_vectors(tmp_path, embedder):
    open_ws(make_sample_root(tmp_path / "one"), embedder).index()
    shared_cache.close_all()
    clone = make_sample_root(tmp_path / "two")
    shutil.rmtree(clone / ".rag-lsp", ignore_errors=True)
    proc = subprocess.run([sys.executable, "-m", "rag_lsp", "index", str(clone), "--json"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["files_indexed"] == 5
    assert report["chunks_embedded"] == 0 and report["chunks_cached"] > 0


@pytest.mark.parametrize("key, value, message", [
    ("embeddingCacheMegabytes", 0, "`embeddingCacheMegabytes` = 0 in .rag-lsp.json: must be "
     "at least 1"),
    ("embeddingCache", "yes", "`embeddingCache` = 'yes' in .rag-lsp.json: must be true or false"),
])
def test_bad_cache_settings_say_what_is_allowed(key, value, message):
    _, problems = validate_settings({key: value}, source=".rag-lsp.json")
    assert any(message in p for p in problems), problems
