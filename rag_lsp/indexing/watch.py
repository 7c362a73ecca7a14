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
        try:
            for changes in watchfiles.watch(
                self.root,
                stop_event=self._stop,
                step=WATCH_STEP_MS,
                debounce=WATCH_DEBOUNCE_MS,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                self._on_paths([path for _change, path in changes])
        except Exception as exc:  # e.g. the inotify watch limit; say so, keep serving
            log.warning("cannot watch %s for changes (%s); the index follows only the "
                        "editor's events and saves until the server restarts", self.root, exc)
