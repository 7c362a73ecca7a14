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


class Seen:
    def __init__(self) -> None:
        self.paths: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, paths: list[str]) -> None:
        with self._lock:
            self.paths.extend(paths)

    def wait_for(self, path: Path, seconds: float = 20.0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self._lock:
                if str(path) in self.paths:
                    return True
            time.sleep(0.05)
        return False


@pytest.fixture
def watching(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    seen = Seen()
    watcher = FolderWatcher(root, seen)
    watcher.start()
    time.sleep(0.3)  # (the watch is set up in its thread)
    yield root, seen
    watcher.stop()


def test_a_folder_deleted_and_made_again_is_watched_again(watching):
    root, seen = watching
    (root / "before.py").write_text("x = 1\n")
    assert seen.wait_for(root / "before.py")
    shutil.rmtree(root)
    time.sleep(1.5)
    root.mkdir()
    (root / "early.py").write_text("x = 2\n")  # before the watch is back: reported with it
    assert seen.wait_for(root / "early.py"), "what came back with the folder is reported"
    for attempt in range(3):  # edits after it: every one seen, not just the first
        (root / "later.py").write_text(f"x = {attempt}\n")
        assert seen.wait_for(root / "later.py")
        seen.paths.clear()


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
    seen = Seen()
    watcher = FolderWatcher(root, seen)
    watcher.start()
    try:
        deadline = time.monotonic() + 10
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        (root / "after.py").write_text("x = 1\n")
        assert seen.wait_for(root / "after.py")
        assert "failed (Unable to decode path)" in caplog.text  # said, and watched again
    finally:
        watcher.stop()
