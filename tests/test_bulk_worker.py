"""Indexing's model calls in a child process (``embedding/bulk_worker.py``): the same vectors
as in process, stopped for a search and run again, a child that dies replaced, a broken
model reported with its fix, and no child left behind (idle, or its parent gone)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from rag_lsp import priority
from rag_lsp.embedding import embedder as embedder_module
from rag_lsp.embedding.bulk_worker import BatchInterrupted, BulkWorker, WorkerExited, _Calls
from rag_lsp.embedding.embedder import OnnxEmbedder
from rag_lsp.errors import ModelIntegrityError
from rag_lsp.indexing import indexer as indexer_module
from rag_lsp.store import vector_index
from rag_lsp.store.lance_store import ChunkStore
from tests.conftest import indexed_sample

# The child is POSIX's (its stop pipe is an inherited descriptor); /proc is Linux's.
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the embedding child runs on POSIX; checked via /proc")

TEXTS = ["def follow_redirects(response, max_hops=5): ...",
         "class LRUCache:\n    \"\"\"Least recently used entries go first.\"\"\"",
         "Retries back off exponentially " * 40]  # long: cut at the model's 256 word-pieces
# One slow batch: 32 texts of 256 word-pieces take ~1 s on one thread.
LONG_BATCH = [f"chunk {i} of a long module with many words in it " * 40 for i in range(32)]


@pytest.fixture(scope="module")
def child_embedder(model_files):
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
    yield embedder
    embedder.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet waited for) counts as gone.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_the_child_gives_the_vectors_the_process_gives(child_embedder, embedder):
    vectors = child_embedder.embed(TEXTS)
    assert child_embedder.holds_bulk_session and isinstance(child_embedder._bulk, BulkWorker)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, embedder.embed(TEXTS), atol=1e-6)
    # Queries stay in this process, on a session of their own (the query model's: close).
    assert float(child_embedder.embed_query(TEXTS[0]) @ vectors[0]) > 0.995


@pytest.mark.parametrize("in_child", [True, False])
def test_a_background_batch_is_stopped_for_a_search_and_run_again(in_child, child_embedder,
                                                                   embedder, monkeypatch):
    target = child_embedder if in_child else embedder
    monkeypatch.setattr(target, "max_batch_tokens", 10**6)  # LONG_BATCH is one batch
    expected = embedder.embed(LONG_BATCH[:2])
    bulk = target._take_bulk()
    outcomes: list[str] = []
    try:
        stopper = threading.Timer(0.3, target.interrupt_background)
        stopper.start()
        started = time.monotonic()
        try:
            bulk.run([e.ids for e in target._tokenizer.encode_batch(LONG_BATCH)],
                     interruptible=True)
            outcomes.append("finished")
        except BatchInterrupted:
            outcomes.append(f"stopped after {time.monotonic() - started:.2f} s")
        stopper.join()
    finally:
        target._put_bulk()
    assert outcomes[0].startswith("stopped"), outcomes
    # The embedder runs a stopped batch again after the search: every vector is right.
    calls: list[str] = []
    threading.Timer(0.3, target.interrupt_background).start()
    vectors = target.embed(LONG_BATCH, before_batch=lambda: calls.append("before"))
    assert calls == ["before", "before"]  # one batch: stopped once, then run to the end
    np.testing.assert_allclose(vectors[:2], expected, atol=1e-6)


def test_a_stop_that_arrives_before_its_call_still_stops_it():
    calls = _Calls()
    calls.stop(3)  # the child has not read call 3 yet
    assert calls.stopped >= 3
    calls.stop(2)  # a late stop of an earlier call changes nothing
    assert calls.stopped == 3


def test_a_foreground_call_is_never_stopped(child_embedder):
    threading.Timer(0.2, child_embedder.interrupt_background).start()
    vectors = child_embedder.embed(LONG_BATCH)  # no before_batch: the CLI's whole run
    assert np.isfinite(vectors).all() and np.allclose(np.linalg.norm(vectors, axis=1), 1)


def test_a_child_that_dies_is_replaced_and_the_batch_run_again(child_embedder, embedder,
                                                               caplog):
    child_embedder.embed(TEXTS[:1])
    old_pid = child_embedder._bulk.pid
    os.kill(old_pid, signal.SIGKILL)
    vectors = child_embedder.embed(TEXTS)
    np.testing.assert_allclose(vectors, embedder.embed(TEXTS), atol=1e-6)
    assert child_embedder._bulk.pid != old_pid and not _alive(old_pid)
    assert f"the embedding process {old_pid} exited" in caplog.text


def test_a_closed_child_says_so_and_a_stop_for_it_is_harmless(model_files):
    worker = BulkWorker(model_files.onnx_path, 1, 384)
    worker.close()
    worker.interrupt()  # a search after another folder replaced it: no error
    with pytest.raises(WorkerExited, match="was ended"):
        worker.run([[101, 102]], interruptible=True)


def test_a_background_call_waiting_for_another_is_stopped_by_a_search(model_files):
    """Two folders share the child: a search stops the call under way and the one waiting."""
    worker = BulkWorker(model_files.onnx_path, 1, 384)
    outcome: list[str] = []

    def waiting_call() -> None:
        try:
            worker.run([[101, 2000, 102]], interruptible=True)
            outcome.append("ran")
        except BatchInterrupted:
            outcome.append("stopped")

    try:
        with worker._lock:  # another folder's call under way
            thread = threading.Thread(target=waiting_call)
            thread.start()
            time.sleep(0.2)
            worker.interrupt()
        thread.join(timeout=30)
        assert outcome == ["stopped"]
        assert worker.run([[101, 2000, 102]], interruptible=True).shape == (1, 384)
    finally:
        worker.close()


def test_the_workspace_folder_cannot_put_modules_into_the_child(model_files, tmp_path,
                                                                 monkeypatch):
    """The server runs in the user's workspace; a numpy.py there must not run in the child."""
    marker = tmp_path / "imported"
    (tmp_path / "numpy.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\nraise ImportError('not numpy')\n")
    monkeypatch.chdir(tmp_path)
    worker = BulkWorker(model_files.onnx_path, 1, 384)
    try:
        assert worker.run([[101, 2000, 102]], interruptible=False).shape == (1, 384)
    finally:
        worker.close()
    assert not marker.exists()


def test_a_child_that_cannot_start_leaves_indexing_in_process(model_files, monkeypatch,
                                                              caplog):
    monkeypatch.setattr("rag_lsp.embedding.bulk_worker.sys.executable", "/bin/false")
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
    vectors = embedder.embed(TEXTS[:1])
    assert vectors.shape == (1, 384) and not embedder.bulk_in_child
    assert "indexing's model calls run in this process instead" in caplog.text


def test_a_model_the_child_cannot_load_is_reported_with_its_fix(tmp_path):
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not an onnx graph")
    with pytest.raises(ModelIntegrityError, match="rag-lsp model install --force"):
        BulkWorker(broken, 1, 384)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_the_child_runs_below_the_searches_priority(child_embedder):
    child_embedder.embed(TEXTS[:1])
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, child_embedder._bulk.pid) == min(
        19, base + priority.BACKGROUND_NICENESS)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_a_child_started_by_the_lowered_writer_thread_is_lowered_once(model_files):
    """The server's writer thread, already 10 levels down, starts the child: it runs 10
    levels below the process, not 20."""
    started: list[int] = []

    def writer() -> None:
        priority.run_in_background()
        embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
        embedder.embed(TEXTS[:1])
        started.append(os.getpriority(os.PRIO_PROCESS, embedder._bulk.pid))
        embedder.close()

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    assert started == [min(19, os.getpriority(os.PRIO_PROCESS, 0)
                           + priority.BACKGROUND_NICENESS)]


def test_an_idle_child_exits(model_files, monkeypatch):
    monkeypatch.setattr(embedder_module, "BULK_IDLE_SECONDS", 0.2)
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
    embedder.embed(TEXTS[:1])
    pid = embedder._bulk.pid
    deadline = time.monotonic() + 10
    while (embedder.holds_bulk_session or _alive(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not embedder.holds_bulk_session and not _alive(pid)


def test_the_child_exits_with_its_parent(model_files):
    """A server killed outright leaves no embedding process behind: the child's input closes."""
    script = (
        "import os, sys\n"
        "from rag_lsp.embedding.embedder import OnnxEmbedder\n"
        "from rag_lsp.embedding.model_files import find_model\n"
        f"e = OnnxEmbedder(find_model({str(model_files.onnx_path.parent)!r}), "
        "index_threads=1, bulk_in_child=True)\n"
        "e.embed(['x'])\n"
        "print(e._bulk.pid, flush=True)\n"
        "os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    pid = int(out.split()[-1])
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


class _AtTraining:
    """What each training of the ANN index found: whether the embedder held a bulk session,
    and whether the child that embedded last was still alive; and the same for each
    compaction."""

    def __init__(self, embedder, monkeypatch):
        self.embedder, self.children = embedder, []
        self.trainings: list[tuple[bool, bool]] = []
        self.compactions: list[tuple[bool, bool]] = []
        real_train, real_compact = ChunkStore._train_and_compact, ChunkStore._compact
        real_embed = embedder.embed

        def train(store, rows):
            # the compaction after the training runs in the same child
            state = self.state()
            self.trainings.append(state)
            self.compactions.append(state)
            return real_train(store, rows)

        def compact(store):
            self.compactions.append(self.state())
            return real_compact(store)

        def embed(texts, **kwargs):
            vectors = real_embed(texts, **kwargs)
            self.children.append(embedder._bulk.pid if embedder.bulk_in_child else 0)
            return vectors

        monkeypatch.setattr(ChunkStore, "_train_and_compact", train)
        monkeypatch.setattr(ChunkStore, "_compact", compact)
        monkeypatch.setattr(embedder, "embed", embed)

    def state(self) -> tuple[bool, bool]:
        last = self.children[-1] if self.children else 0
        return self.embedder.holds_bulk_session, bool(last) and _alive(last)

    def started_again(self) -> int:
        """The pid of the child started after the training (waits for it)."""
        deadline = time.monotonic() + 60
        while not self.embedder.holds_bulk_session and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.embedder.holds_bulk_session, "no child started after the training"
        pid = self.embedder._bulk.pid
        assert pid not in self.children and _alive(pid)
        return pid


def _write(root, name: str, body: str) -> None:
    (root / name).write_text(body, encoding="utf-8")


def test_the_ann_training_of_a_run_sets_the_bulk_session_aside(tmp_path, model_files,
                                                               monkeypatch):
    """Past 50k chunks the ANN index is trained again now and then, and the compaction after
    it rewrites every row: +190 MB at 100k chunks, the highest peak of a large workspace,
    while the bulk session, idle between batches, would hold its child's ~226 MB beside it.
    The child is ended for those steps and started again after (the run's next batch embeds
    in the new one); compactions that train nothing leave it alone (an edit saved then does
    not wait for a new child)."""
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
    try:
        workspace = indexed_sample(tmp_path, embedder)
        monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", 5)  # the sample is "large"
        monkeypatch.setattr(indexer_module, "WRITE_BATCH_CHUNKS", 1)  # a batch a file
        monkeypatch.setattr(indexer_module, "OPTIMIZE_EVERY_BATCHES", 2)
        at = _AtTraining(embedder, monkeypatch)
        for n in range(5):
            _write(workspace.root, f"src/ledger_{n}.py",
                   f"def reconcile_ledger_{n}(rows):\n    return sum(rows) + {n}\n")
        assert workspace.index().files_indexed == 5
        # Trained after the second batch, with no child; the compaction before the training
        # had one, the one after it none; later batches embedded in a new child. The run,
        # which folded batches as it went, ends trained again as one segment (see
        # Indexer._finish), with no child either.
        assert at.trainings == [(False, False), (False, False)]
        assert at.compactions[:2] == [(True, True), (False, False)]
        assert len(set(at.children)) == 2
        # A compaction with nothing to train keeps the child (a save's, started for it).
        _write(workspace.root, "src/ledger_0.py", "def reconcile_ledger_0(rows):\n    return 0\n")
        workspace.update(["src/ledger_0.py"])
        pid = embedder._bulk.pid
        workspace.compact(force=True)
        assert len(at.trainings) == 2 and at.compactions[-1] == (True, True)
        assert embedder._bulk.pid == pid
        hit = workspace.search("reconcile_ledger_4", top_k=1, mode="lexical").results[0]
        assert hit.path == "src/ledger_4.py"
    finally:
        embedder.close()


def test_a_settled_compaction_that_trains_sets_the_bulk_session_aside(tmp_path, model_files,
                                                                     monkeypatch):
    """The compaction the server asks for once edits settle, likewise; a child is started
    again in the background, and the next edit embeds in it."""
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
    try:
        workspace = indexed_sample(tmp_path, embedder)
        at = _AtTraining(embedder, monkeypatch)
        _write(workspace.root, "src/ledger.py", "def reconcile_ledger(rows):\n    return 1\n")
        workspace.update(["src/ledger.py"])
        assert embedder.holds_bulk_session and _alive(at.children[-1])
        monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", 5)  # now past the size
        workspace.compact()
        assert at.trainings == [(False, False)]
        pid = at.started_again()
        _write(workspace.root, "src/ledger.py", "def reconcile_ledger(rows):\n    return 2\n")
        workspace.update(["src/ledger.py"])
        assert at.children[-1] == pid  # embedded by the child started after the training
    finally:
        embedder.close()


def test_a_session_in_process_is_let_go_for_a_training_and_not_made_again(
        tmp_path, model_files, monkeypatch):
    """``rag-lsp index`` keeps the model in its own process: the training lets it go (its
    memory handed back) and only the next batch makes it again."""
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=False)
    workspace = indexed_sample(tmp_path, embedder)
    at = _AtTraining(embedder, monkeypatch)
    restarts: list[int] = []
    monkeypatch.setattr(embedder, "_restart_bulk", restarts.append)
    _write(workspace.root, "src/ledger.py", "def ledger():\n    return 1\n")
    workspace.update(["src/ledger.py"])
    assert embedder.holds_bulk_session
    monkeypatch.setattr(vector_index, "MATRIX_MAX_ROWS", 5)
    workspace.compact()
    assert at.trainings == [(False, False)] and not embedder.holds_bulk_session
    assert restarts == []


def test_a_session_in_use_is_not_set_aside(child_embedder, monkeypatch):
    """A batch under way (another folder's: they share the embedder) keeps its child, and
    nothing is started after."""
    child_embedder.embed(TEXTS[:1])
    pid = child_embedder._bulk.pid
    restarts: list[int] = []
    monkeypatch.setattr(child_embedder, "_restart_bulk", restarts.append)
    child_embedder._take_bulk()  # as a batch does while it runs
    try:
        with child_embedder.bulk_session_set_aside():
            assert child_embedder._bulk.pid == pid and _alive(pid)
    finally:
        child_embedder._put_bulk()
    assert restarts == [] and child_embedder._bulk.pid == pid


def test_a_close_during_the_step_keeps_the_child_from_starting_again(model_files, monkeypatch):
    """Let go for good meanwhile (a server shutting down): nothing is started after; without
    that close, a child is."""
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
    started: list[bool] = []
    real_restart = embedder._restart_bulk
    monkeypatch.setattr(embedder, "_restart_bulk",
                        lambda closes: real_restart(closes) or started.append(
                            embedder.holds_bulk_session))

    def set_aside(close_meanwhile: bool) -> bool:
        embedder.embed(TEXTS[:1])
        with embedder.bulk_session_set_aside():
            assert not embedder.holds_bulk_session
            if close_meanwhile:
                embedder.close()
        deadline = time.monotonic() + 60
        while not started and time.monotonic() < deadline:
            time.sleep(0.02)
        return started.pop()

    try:
        assert set_aside(close_meanwhile=True) is False
        assert set_aside(close_meanwhile=False) is True
    finally:
        embedder.close()


def _bulk_children(pid: int) -> list[int]:
    """The live embedding children of ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"bulk_worker" in command:
            found.append(int(entry))
    return found


def test_a_stopped_child_is_ended_at_shut_down_and_none_started_again(model_files):
    """A child stopped (SIGSTOP) or stuck mid-batch kept the server alive after `exit` until
    its call timed out (600 s then)."""
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
    embedder.embed(TEXTS[:1])
    child = embedder._bulk.pid
    others = set(_bulk_children(os.getpid())) - {child}  # (other tests' embedders)
    failed: list[BaseException] = []

    def index() -> None:
        try:
            embedder.embed(LONG_BATCH * 20)
        except BaseException as exc:  # noqa: BLE001 (the test reads it)
            failed.append(exc)
    thread = threading.Thread(target=index)
    thread.start()
    time.sleep(0.5)
    os.kill(child, signal.SIGSTOP)
    try:
        embedder.shut_down()
        thread.join(timeout=15)
        assert not thread.is_alive(), "the batch still waits for the stopped child"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGCONT)
    assert failed and isinstance(failed[0], WorkerExited), failed
    assert "exiting" in str(failed[0]) and not _alive(child)
    assert embedder._bulk is None
    assert set(_bulk_children(os.getpid())) == others  # other embedders' children are theirs


def test_a_child_killed_as_it_starts_leaves_the_next_batch_to_a_child(model_files,
                                                                      monkeypatch, caplog):
    """The out-of-memory killer taking a new child is no sign that a child cannot run here:
    the server's memory was to hold the model's session for good."""
    embedder = OnnxEmbedder(model_files, index_threads=1, bulk_in_child=True)
    starts = []

    class KilledOnce(BulkWorker):
        def __init__(self, *args):
            starts.append(args)
            if len(starts) == 1:
                raise WorkerExited("the embedding process 1 exited (code -9)", killed=True)
            super().__init__(*args)
    monkeypatch.setattr(embedder_module, "BulkWorker", KilledOnce)
    assert embedder.embed(TEXTS[:1]).shape == (1, 384)  # in this process, this time
    assert embedder.bulk_in_child and "run in this process" in caplog.text
    assert embedder.close()  # (as an idle session is let go)
    embedder.embed(TEXTS[:1])
    try:
        assert len(starts) == 2 and isinstance(embedder._bulk, BulkWorker)
    finally:
        embedder.close()


@pytest.mark.parametrize("stopped_after", [0.0, 4.0], ids=["loading", "mid-batch"])
def test_the_server_exits_at_once_with_its_model_child_stopped(tmp_path, stopped_after):
    """The real server over stdio: `shutdown` and `exit` while the child that embeds for it
    is stopped as it loads the model, or mid-index. It had stayed alive until the child's
    call timed out; a child loading held the lock `shutdown` would have taken."""
    from tests.raw_lsp import RawServer

    root = tmp_path / "repo"
    for n in range(60):
        (root / "pkg").mkdir(parents=True, exist_ok=True)
        _write(root, f"pkg/m{n}.py", "\n\n".join(
            f"def step_{n}_{k}(x):\n    '''{LONG_BATCH[k % 32]}'''\n    return x + {k}\n"
            for k in range(20)))
    server = RawServer(root)
    child = None
    try:
        deadline = time.monotonic() + 60
        while not (children := _bulk_children(server.process.pid)):
            assert time.monotonic() < deadline, "no embedding child started"
            time.sleep(0.1)
        child = children[0]
        time.sleep(stopped_after)
        os.kill(child, signal.SIGSTOP)
        (folder,) = server.request("rag/status", {})["result"]["folders"]
        assert folder["state"] in ("scanning", "indexing"), folder  # its work not done
        assert "result" in server.request("shutdown", None)
        server.notify("exit", None)
        server.process.wait(timeout=15)
        assert not _alive(child)
    finally:
        if child is not None and _alive(child):  # (a stopped orphan would stay for good)
            os.kill(child, signal.SIGKILL)
        if server.process.poll() is None:
            server.process.kill()
    assert server.process.returncode == 0
