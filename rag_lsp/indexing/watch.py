"""Watching a folder for file changes ourselves (inotify and friends, via ``watchfiles``), for
processes whose client does not report them: the language server for minimal editors, and the
MCP server, whose agents never do."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import watchfiles

log = logging.getLogger(__name__)

# watchfiles yields once no new event arrived for STEP ms, or after DEBOUNCE ms of a stream.
WATCH_STEP_MS = 20
WATCH_DEBOUNCE_MS = 200
WATCH_TIMEOUT_MS = 1000  # with no event, the watch wakes this often to see its folder is there
WATCH_RETRY_SECONDS = 1.0  # a folder gone is looked for this often; a failed watch retried
WATCH_RETRY_MAX_SECONDS = 60.0  # after 2, 4, 8… s, at most this


class FolderWatcher:
    """A thread that watches one folder and hands changed paths (absolute) to ``on_paths``."""

    def __init__(self, root: Path, on_paths: Callable[[list[str]], None]):
        self.root = root
        self._on_paths = on_paths
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, name=f"rag-watch-{root.name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        """Watch until stopped. A watch that fails (a name the platform cannot decode, the
        inotify limit) is started again after a pause; a folder deleted is watched again once
        it is back, its entries reported as changed (whatever came back with it)."""
        failures = 0
        while not self._stop.is_set():
            if not self.root.is_dir():  # deleted, or moved away
                self._stop.wait(WATCH_RETRY_SECONDS)
                if self.root.is_dir() and not self._stop.is_set():
                    log.info("%s is back; watching it again", self.root)
                    self._on_paths([str(entry) for entry in self.root.iterdir()])
                continue
            try:
                for changes in watchfiles.watch(
                    self.root,
                    stop_event=self._stop,
                    step=WATCH_STEP_MS,
                    debounce=WATCH_DEBOUNCE_MS,
                    rust_timeout=WATCH_TIMEOUT_MS,
                    yield_on_timeout=True,  # (an empty set: a look at the folder itself)
                    raise_interrupt=False,
                    ignore_permission_denied=True,
                ):
                    if changes:
                        self._on_paths([path for _change, path in changes])
                        failures = 0
                    if not self.root.is_dir():
                        break  # its watch went with it
                else:
                    return  # stopped
            except Exception as exc:  # e.g. the inotify watch limit; say so, keep serving
                failures += 1
                pause = min(WATCH_RETRY_MAX_SECONDS, WATCH_RETRY_SECONDS * 2 ** failures)
                log.warning("watching %s for changes failed (%s); the index follows only the "
                            "editor's events and saves until it is watched again, in %.0f s",
                            self.root, exc, pause)
                self._stop.wait(pause)
