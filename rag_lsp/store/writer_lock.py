"""One writer per index, across processes.

LanceDB allows one writer per table: two processes replacing the same files both commit and
the index keeps both copies. So every write to an index (an indexing run, a batch of file
changes, a compaction, a rebuild) holds an exclusive lock on ``<index>/writer.lock`` while it
lasts. The file records who holds it (pid, command, since when) so a process that waits can
say for whom. The lock itself is the kernel's (``flock``): it goes when its holder exits,
however it exits, so a holder killed with -9 leaves a file behind but never a stale lock.

Readers take no lock: LanceDB gives them consistent snapshots, and they follow new versions.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rag_lsp.errors import IndexBusyError
from rag_lsp.store.failures import transient_failure
from rag_lsp.store.private import NO_FOLLOW, PRIVATE_FILE, index_folder

LOCK_NAME = "writer.lock"
POLL_SECONDS = 0.2

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    # Windows locks are mandatory: lock a byte far past the owner record, which stays readable.
    _FAR = 1 << 30

    def _try_lock(fd: int, shared: bool = False) -> bool:
        try:
            os.lseek(fd, _FAR, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        os.lseek(fd, _FAR, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _try_lock(fd: int, shared: bool = False) -> bool:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@dataclass(frozen=True)
class LockOwner:
    """Who holds (or last held) an index's writer lock."""

    pid: int
    command: str
    since: str

    def describe(self) -> str:
        return f"{self.command} (pid {self.pid}, writing since {self.since})"


def _command() -> str:
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    args = [a for a in sys.argv[1:3] if not a.startswith("-")]
    return " ".join(["rag-lsp" if name in ("__main__.py", "rag-lsp") else name, *args])


class WriterLock:
    """The writer lock of one index folder. Re-entrant within its owner object."""

    def __init__(self, index_dir: Path):
        self.index_dir = index_dir
        self.path = index_dir / LOCK_NAME
        self.pid = os.getpid()
        self._fd: int | None = None
        self._depth = 0
        self._mutex = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(
        self,
        *,
        wait: bool = True,
        on_wait: Callable[[LockOwner | None], None] | None = None,
    ) -> None:
        """Take the lock. Held elsewhere: raise :class:`IndexBusyError` (``wait=False``), or
        call ``on_wait(owner)`` every poll and try again; ``on_wait`` raises to give up."""
        with self._mutex:
            if self._fd is not None:
                self._depth += 1
                return
        try:
            index_folder(self.index_dir)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | NO_FOLLOW, PRIVATE_FILE)
        except OSError as exc:  # a read-only mount, a full disk: said so, not a traceback
            failure = transient_failure(exc, f"the index folder {self.index_dir}")
            if failure is None:
                raise
            raise failure from exc
        try:
            while not _try_lock(fd):
                owner = self.owner()
                if not wait:
                    raise IndexBusyError(self.busy_message(owner))
                if on_wait is not None:
                    on_wait(owner)
                time.sleep(POLL_SECONDS)
            self._write_owner(fd)
        except BaseException:
            os.close(fd)
            raise
        with self._mutex:
            self._fd, self._depth = fd, 1

    def release(self) -> None:
        with self._mutex:
            if self._fd is None:
                return
            self._depth -= 1
            if self._depth > 0:
                return
            fd, self._fd = self._fd, None
        try:
            _unlock(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def owner(self) -> LockOwner | None:
        """The holder recorded in the lock file (``None`` if unreadable or never written)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return LockOwner(int(data["pid"]), str(data["command"]), str(data["since"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def holder_elsewhere(self) -> LockOwner | None:
        """Who writes this index now, if not this object (``None`` when nobody does)."""
        if self.held or not self.path.exists():
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | NO_FOLLOW)
        except OSError:
            return None
        try:
            if _try_lock(fd, shared=True):
                _unlock(fd)
                return None
            return self.owner() or LockOwner(0, "another process", "unknown")
        finally:
            os.close(fd)

    def busy_message(self, owner: LockOwner | None) -> str:
        who = owner.describe() if owner else "another process"
        return (f"the index at {self.index_dir} is being written by {who}; "
                "try again when it has finished")

    def _write_owner(self, fd: int) -> None:
        since = datetime.now(timezone.utc).isoformat(timespec="seconds")
        record = json.dumps({"pid": self.pid, "command": _command(), "since": since})
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (record + "\n").encode("utf-8"))
