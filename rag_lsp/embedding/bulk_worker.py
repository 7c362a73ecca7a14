"""Indexing's model calls in a child process, for a long-running server.

Why: the session that embeds in bulk holds ~135 MB, and its memory arena grows to fit the
largest batch (~60–110 MB more) and keeps it. In a language server that sits beside the
editor for days, that is most of its memory while it indexes (bench/index_workspace.py). In
a child the server holds only the query's session; the child runs at the background
priority as a whole process (every thread onnxruntime starts) and exits once idle, handing
everything back (the embedder also ends it while the ANN index is trained, and starts one
again after: ``OnnxEmbedder.bulk_session_set_aside``). The cost: ~60 MB for the child's own
interpreter while it lives, ~0.6 s to start it, and a copy of each batch's ids and vectors
through a pipe (~0.1 ms a batch).

Both ends are here, so the wire format is in one place:

- parent -> child (stdin): ``<QII`` request number, rows, columns; the rows' lengths
  (int32); the ids, zero-padded to ``rows × columns`` (int32).
- child -> parent (stdout): ``<QBI`` request number, status, payload bytes; the payload
  (``VECTORS``: float32 ``rows × dimension``; ``FAILED``: a UTF-8 message). ``READY`` (request 0)
  comes first, once the model has loaded.
- interrupting (a pipe of its own, so it is read while a call runs): ``<Q`` the request to
  stop. The call stops mid-way and answers ``INTERRUPTED``; the parent runs it again later.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from rag_lsp.embedding.onnx_session import new_session, ort, padded, run_pooled
from rag_lsp.errors import ModelIntegrityError, RagLspError
from rag_lsp.priority import background_niceness, lower_this_child_process

_REQUEST = struct.Struct("<QII")
_ANSWER = struct.Struct("<QBI")
_STOP = struct.Struct("<Q")
READY, VECTORS, INTERRUPTED, FAILED = range(4)
START_TIMEOUT_SECONDS = 120.0  # loading the model takes ~0.6 s; a loaded machine, longer
# A batch takes ~1 s on one thread (~10 s at the background priority beside a build on every
# core); a child that has not answered in this long is stuck (or stopped): it is killed, and
# the embedder starts another. (600 s had left a stopped child's folder "indexing" for ten
# minutes with nothing said.)
CALL_TIMEOUT_SECONDS = 120.0


class Children:
    """The children one embedder started, registered as each starts (before it is ready: one
    still loading the model holds the embedder's lock until then, or START_TIMEOUT), so that
    all of them can be ended at once when the process exits."""

    def __init__(self) -> None:
        self._started: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()
        self.ended = False

    def add(self, process: subprocess.Popen) -> None:
        self._started.add(process)
        if self.ended:  # started as end_all ran: ended too
            process.kill()

    def end_all(self) -> None:
        """Kill every child, mid-call, loading or stopped (SIGSTOP), and any started after:
        a stuck child kept the process alive after ``exit`` until its call timed out."""
        self.ended = True
        for process in list(self._started):
            try:
                process.kill()
            except OSError:  # gone already
                pass


class BatchInterrupted(Exception):
    """The call was stopped for a search; run it again after the search."""


class WorkerExited(RagLspError):
    """The child process ended or stopped answering; a new one may do better. ``killed``:
    SIGKILL'd from outside (the out-of-memory killer, a user), which says nothing of whether
    a child can run here."""

    def __init__(self, message: str, *, killed: bool = False):
        super().__init__(message)
        self.killed = killed


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


# ---- the parent's end ------------------------------------------------------------------------


class BulkWorker:
    """One child process running the model on ``threads`` threads. Calls are serialised (the
    child runs one at a time); :meth:`interrupt` may come from any thread."""

    def __init__(self, onnx_path: Path, threads: int, dimension: int,
                 children: Children | None = None):
        self.threads = threads
        self._timed_out = False  # killed by this end, not from outside
        self.dimension = dimension
        stop_read, stop_write = os.pipe()
        package_parent = str(Path(__file__).resolve().parents[2])
        try:
            # At the background priority: the parent's, whichever of its threads starts it.
            # From the folder that holds this rag_lsp: `-m` puts the working folder first on
            # the import path, so the child imports this very rag_lsp, wherever it lives, and
            # never a module of the server's working folder (usually the user's workspace,
            # whose numpy.py, say, must not run here).
            self._process = subprocess.Popen(
                [sys.executable, "-m", "rag_lsp.embedding.bulk_worker", str(onnx_path),
                 str(threads), str(stop_read), str(background_niceness())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(stop_read,),
                cwd=package_parent)
        except OSError as exc:
            os.close(stop_write)
            raise WorkerExited(f"cannot start the embedding process: {exc}") from exc
        finally:
            os.close(stop_read)
        if children is not None:
            children.add(self._process)
        self._stop = os.fdopen(stop_write, "wb", buffering=0)
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._sent = 0
        self._interruptible: int | None = None  # the background call under way
        # Stops asked for so far: a background call that waited for another (two folders
        # share the child) and saw one meanwhile is stopped before it starts.
        self._interrupts = 0
        self.closed = False
        try:
            self._ready()
        except BaseException:
            self.close()
            raise

    def _ready(self) -> None:
        # The child reports whether the model loaded; a broken model is the user's to fix.
        number, status, payload = self._answer(START_TIMEOUT_SECONDS)
        if status == FAILED:
            self.close()
            raise ModelIntegrityError(payload.decode("utf-8", "replace"))
        if status != READY or number != 0:
            self.close()
            raise WorkerExited(f"the embedding process answered {status} before it was ready")

    @property
    def pid(self) -> int:
        return self._process.pid

    def run(self, ids_list: Sequence[Sequence[int] | np.ndarray], *,
            interruptible: bool) -> np.ndarray:
        """The batch's vectors. Raises :class:`BatchInterrupted` when an ``interruptible``
        call was stopped, :class:`WorkerExited` when the child is gone."""
        input_ids, mask = padded(ids_list)
        ids, lengths = input_ids.astype(np.int32), mask.sum(axis=1, dtype=np.int32)
        interrupts = self._interrupts
        with self._lock:
            if self.closed:
                raise WorkerExited(f"the embedding process {self.pid} was ended")
            if interruptible and self._interrupts != interrupts:
                raise BatchInterrupted  # a search came while this call waited its turn
            self._sent += 1
            number = self._sent
            if interruptible:
                with self._stop_lock:
                    self._interruptible = number
            try:
                self._send(_REQUEST.pack(number, *ids.shape) + lengths.tobytes() + ids.tobytes())
                answered, status, payload = self._answer(CALL_TIMEOUT_SECONDS)
            finally:
                with self._stop_lock:
                    self._interruptible = None
        if answered != number:
            raise WorkerExited(f"the embedding process answered call {answered}, not {number}")
        if status == INTERRUPTED:
            raise BatchInterrupted
        if status == FAILED:
            raise RagLspError(f"embedding failed: {payload.decode('utf-8', 'replace')}")
        return np.frombuffer(payload, dtype=np.float32).reshape(len(ids_list), self.dimension)

    def interrupt(self) -> None:
        """Stop the background call under way, and those waiting for it."""
        with self._stop_lock:
            self._interrupts += 1
            if self._interruptible is None:
                return
            try:
                self._stop.write(_STOP.pack(self._interruptible))
            except (OSError, ValueError):  # gone or closed: the call under way reports it
                pass

    def _send(self, data: bytes) -> None:
        try:
            assert self._process.stdin is not None
            self._process.stdin.write(data)
            self._process.stdin.flush()
        except (OSError, ValueError) as exc:  # (ValueError: closed meanwhile)
            raise self._exited() from exc

    def _answer(self, timeout: float) -> tuple[int, int, bytes]:
        assert self._process.stdout is not None
        timer = threading.Timer(timeout, self._kill_stuck)  # stuck: its pipe then closes
        timer.daemon = True
        timer.start()
        try:
            header = _read_exactly(self._process.stdout, _ANSWER.size)
            if header is None:
                raise self._exited()
            number, status, size = _ANSWER.unpack(header)
            payload = _read_exactly(self._process.stdout, size)
            if payload is None:
                raise self._exited()
        except ValueError as exc:  # closed meanwhile
            raise self._exited() from exc
        finally:
            timer.cancel()
        return number, status, payload

    def _kill_stuck(self) -> None:
        self._timed_out = True
        self._process.kill()

    def _exited(self) -> WorkerExited:
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            code = self._process.wait()
        # Killed from outside (SIGKILL: the out-of-memory killer, a user), not by our timer
        # nor by a signal a sandbox sends (SIGSYS): another child may well do better.
        return WorkerExited(f"the embedding process {self.pid} exited (code {code})",
                            killed=code == -signal.SIGKILL and not self._timed_out)

    def close(self) -> None:
        """End the child (it exits when its input closes) and wait for it. A call under way,
        or made later, raises :class:`WorkerExited`."""
        self.closed = True
        for stream in (self._process.stdin, self._stop):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


# ---- the child's end ------------------------------------------------------------------------


class _Calls:
    """The call under way and the stops asked for, shared with the thread reading stops."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.number = 0
        self.options = None
        self.stopped = 0  # the latest call a stop was asked for (it may not have started)

    def stop(self, number: int) -> None:
        with self.lock:
            self.stopped = max(self.stopped, number)
            if number == self.number and self.options is not None:
                self.options.terminate = True


def _read_stops(stream: BinaryIO, calls: _Calls) -> None:
    while (data := _read_exactly(stream, _STOP.size)) is not None:
        calls.stop(_STOP.unpack(data)[0])


def _serve(session, requests: BinaryIO, answers: BinaryIO, calls: _Calls) -> None:
    def answer(number: int, status: int, payload: bytes = b"") -> None:
        answers.write(_ANSWER.pack(number, status, len(payload)) + payload)
        answers.flush()

    answer(0, READY)
    while (header := _read_exactly(requests, _REQUEST.size)) is not None:
        number, rows, columns = _REQUEST.unpack(header)
        body = _read_exactly(requests, 4 * rows * (columns + 1))
        if body is None:
            return
        lengths = np.frombuffer(body[: 4 * rows], dtype=np.int32)
        ids = np.frombuffer(body[4 * rows:], dtype=np.int32).reshape(rows, columns)
        mask = (np.arange(columns)[None, :] < lengths[:, None]).astype(np.int64)
        options = ort.RunOptions()
        with calls.lock:
            calls.number, calls.options = number, options
            stopped = calls.stopped >= number
        try:
            if stopped:
                raise BatchInterrupted
            vectors = run_pooled(session, ids.astype(np.int64), mask, options)
        except Exception as exc:
            if stopped or options.terminate:
                answer(number, INTERRUPTED)
            else:
                answer(number, FAILED, f"{type(exc).__name__}: {exc}".encode())
            continue
        finally:
            with calls.lock:
                calls.options = None
        answer(number, VECTORS, np.ascontiguousarray(vectors, dtype=np.float32).tobytes())


def main(argv: list[str] | None = None) -> int:
    onnx_path, threads, stop_fd, niceness = (argv or sys.argv[1:])[:4]
    # Ctrl-C in a terminal reaches the whole process group: the parent decides when this ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Private streams for the wire; anything a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    from rag_lsp.memory import limit_malloc_arenas, return_freed_memory

    lower_this_child_process(int(niceness))  # first: every thread started after inherits it
    limit_malloc_arenas()
    try:
        session = new_session(onnx_path, int(threads), spinning=True)
    except Exception as exc:  # onnxruntime raises several types for unreadable graphs
        message = (f"onnxruntime cannot load {onnx_path} ({exc}). Run `rag-lsp model install "
                   "--force`, or point modelDir at a valid export.").encode()
        answers.write(_ANSWER.pack(0, FAILED, len(message)) + message)
        answers.flush()
        return 1
    return_freed_memory()  # the parsed model file (see OnnxEmbedder._new_session)
    calls = _Calls()
    stops = os.fdopen(int(stop_fd), "rb", buffering=0)
    threading.Thread(target=_read_stops, args=(stops, calls), daemon=True).start()
    try:
        _serve(session, requests, answers, calls)
    except BrokenPipeError:
        pass  # the parent is gone
    return 0


if __name__ == "__main__":
    sys.exit(main())
