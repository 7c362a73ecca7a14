"""The server's own watcher (for clients that report no file events) keeps watching: after a
watch fails, and after its folder is deleted and made again."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from rag_lsp.indexing import watch
from rag_lsp.indexing.watch import FolderWatcher

WAIT_SECONDS = 30.0  # generous: a busy 2-core machine delays the watch's thread


class Seen:
    def __init__(self) -> None:
        self._paths: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, paths: list[str]) -> None:
        with self._lock:
            self._paths.extend(paths)

    def clear(self) -> None:
        with self._lock:
            self._paths.clear()

    def wait_for(self, path: Path, seconds: float = WAIT_SECONDS) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self._lock:
                if str(path) in self._paths:
                    return True
            time.sleep(0.05)
        return False


def watching_now(root: Path, seen: Seen) -> None:
    """Wait until the watch is set up: a probe file written until it is reported."""
    deadline = time.monotonic() + WAIT_SECONDS
    probe = root / "probe.txt"
    while time.monotonic() < deadline:
        probe.write_text(str(time.monotonic()))
        if seen.wait_for(probe, 0.5):
            seen.clear()
            return
    raise AssertionError(f"{root} was not watched within {WAIT_SECONDS} s")


@pytest.fixture
def watching(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    seen = Seen()
    watcher = FolderWatcher(root, seen)
    watcher.start()
    watching_now(root, seen)
    yield root, seen
    watcher.stop()


def _edits_are_seen(root: Path, seen: Seen) -> None:
    for attempt in range(3):  # edits after it: every one seen, not just the first
        seen.clear()
        (root / "later.py").write_text(f"x = {attempt}\n")
        assert seen.wait_for(root / "later.py"), f"edit {attempt} after the folder came back"


def test_a_folder_deleted_and_made_again_is_watched_again(watching):
    root, seen = watching
    shutil.rmtree(root)
    time.sleep(1.5)  # the watch sees the folder gone
    root.mkdir()
    (root / "early.py").write_text("x = 2\n")  # before the watch is back: reported with it
    assert seen.wait_for(root / "early.py"), "what came back with the folder is reported"
    _edits_are_seen(root, seen)


def test_a_folder_replaced_at_once_is_watched_again(watching):
    """Deleted and made again before the watch looks (a re-clone): the old watch followed the
    folder that was gone."""
    root, seen = watching
    shutil.rmtree(root)
    root.mkdir()
    (root / "early.py").write_text("x = 2\n")
    assert seen.wait_for(root / "early.py")
    _edits_are_seen(root, seen)


def test_a_watch_that_fails_is_started_again(tmp_path, monkeypatch, caplog):
    real_watch, calls = watch.watchfiles.watch, []

    def failing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Unable to decode path")  # as for a name that is not UTF-8
        yield from real_watch(*args, **kwargs)

    monkeypatch.setattr(watch.watchfiles, "watch", failing_once)
    monkeypatch.setattr(watch, "WATCH_RETRY_SECONDS", 0.1)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "unwatched.py").write_text("x = 0\n")  # there while no watch ran
    seen = Seen()
    watcher = FolderWatcher(root, seen)
    watcher.start()
    try:
        assert seen.wait_for(root / "unwatched.py"), "what changed unwatched is reported"
        watching_now(root, seen)
        (root / "after.py").write_text("x = 1\n")
        assert seen.wait_for(root / "after.py")
        assert "failed (Unable to decode path)" in caplog.text
    finally:
        watcher.stop()
