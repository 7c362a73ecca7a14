"""Watching a folder for file changes ourselves (inotify and friends, via ``watchfiles``), for
processes whose client does not report them: the language server for minimal editors, and the
MCP server, whose agents never do."""

from __future__ import annotations

import logging
import os
import stat
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
        inotify limit) is started again after a pause; a folder deleted (or replaced: the
        watch would follow the old one) is watched again once it is back. Either way the
        folder's entries are then reported as changed: what changed unwatched is in them."""
        failures = 0
        missed = False  # changes may have gone unwatched: report the entries once watching
        while not self._stop.is_set():
            try:
                identity = _identity(self.root)
                if identity is None:  # deleted, or moved away
                    missed = True
                    self._stop.wait(WATCH_RETRY_SECONDS)
                    continue
                if missed:
                    log.info("watching %s again", self.root)
                    self._on_paths([str(entry) for entry in self.root.iterdir()])
                    missed = False
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
                    # The folder itself deleted (a new one may already stand there, even
                    # with the same inode) or replaced: its watch went with it.
                    if ((watchfiles.Change.deleted, str(self.root)) in changes
                            or _identity(self.root) != identity):
                        missed = True
                        break
                else:
                    return  # stopped
            except Exception as exc:  # e.g. the inotify watch limit; say so, keep serving
                failures += 1
                missed = True
                pause = min(WATCH_RETRY_MAX_SECONDS, WATCH_RETRY_SECONDS * 2 ** failures)
                log.warning("watching %s for changes failed (%s); the index follows only the "
                            "editor's events and saves until it is watched again, in %.0f s",
                            self.root, exc, pause)
                self._stop.wait(pause)


def _identity(folder: Path) -> tuple[int, int] | None:
    """Which folder is at ``folder`` now (device, inode), or ``None`` when there is none."""
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None
