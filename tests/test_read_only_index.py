"""An index folder that cannot be written (a read-only mount, its permissions) is said to be
so, with the fix; it is not called damaged (a knowledge base's advice was "move it aside",
which loses entries), and nothing in it is lost once it can be written again.

The real tests remount a small tmpfs read-only (root in a container may mount; elsewhere they
skip: permission bits do not stop root, so a chmod cannot stand in). The unit tests cover
how LanceDB's and the OS's errors are told apart, anywhere.
"""

from __future__ import annotations

import errno
import subprocess

import pytest

from rag_lsp.config import Settings
from rag_lsp.errors import IndexCorruptError, IndexNotWritableError
from rag_lsp.store.failures import transient_failure
from rag_lsp.workspace import Workspace

from .conftest import mounted_tmpfs, write_files
from .inprocess_cli import rag, share_model


@pytest.mark.parametrize("exc", [
    RuntimeError("lance error: LanceError(IO): Read-only file system (os error 30) at path "
                 "\"/x/knowledge.lance/data/.tmpWIsdNh\""),
    RuntimeError("LanceError(IO): Generic LocalFileSystem error: Permission denied (os error 13)"),
    OSError(errno.EROFS, "Read-only file system"),
    PermissionError(errno.EACCES, "Permission denied"),
    OSError(errno.EACCES, None),  # (no strerror)
])
def test_a_folder_that_cannot_be_written_is_not_damage(exc):
    failure = transient_failure(exc, "the knowledge base in /x")
    assert isinstance(failure, IndexNotWritableError), failure
    assert "nothing in it is lost" in str(failure) and "damaged" not in str(failure)


@pytest.mark.parametrize("exc", [
    RuntimeError("LanceError(IO): unexpected end of file"),
    RuntimeError("LanceError(IO): Not found: /x/chunks.lance/data/a.lance (os error 2)"),
    RuntimeError("lance error: Invalid user input: os error 130"),  # not os error 13
    OSError(errno.ENOENT, "No such file or directory"),
])
def test_other_failures_are_left_to_the_caller(exc):
    assert transient_failure(exc, "x") is None


@pytest.fixture
def mount(tmp_path):
    def remount(mode: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(point)], check=True)
    with mounted_tmpfs(tmp_path / "index", "16m", "the unit tests cover the mapping") as point:
        yield point, remount


def test_a_read_only_index_folder_is_said_to_be_so_and_loses_nothing(tmp_path, mount,
                                                                    embedder):
    index_dir, remount = mount
    root = tmp_path / "repo"
    write_files(root, {"a.py": "def settle_escrow():\n    return 1\n"})
    settings = Settings.from_dict({"indexPath": str(index_dir)})
    Workspace.open(root, settings, embedder=embedder).index()
    kb = Workspace.open(root, settings, embedder=embedder).knowledge
    kept = kb.add("debugger", "the escrow is settled twice on retries").id
    remount("ro")
    try:
        with pytest.raises(IndexNotWritableError, match="read-only file system") as error:
            Workspace.open(root, settings, embedder=embedder).knowledge.add(
                "debugger", "a second finding")
        assert not isinstance(error.value, IndexCorruptError)
        (root / "b.py").write_text("def refund_escrow():\n    return 2\n")
        with pytest.raises(IndexNotWritableError, match="indexPath"):
            Workspace.open(root, settings, embedder=embedder).update(["b.py"])
    finally:
        remount("rw")
    kb = Workspace.open(root, settings, embedder=embedder).knowledge
    assert [e.id for e in kb.list("debugger")[0]] == [kept]
    kb.add("debugger", "a second finding")
    assert kb.list("debugger")[1] == 2


def test_the_cli_says_a_read_only_index_folder_is_so_without_a_traceback(tmp_path, mount,
                                                                         embedder,
                                                                         monkeypatch):
    share_model(monkeypatch, embedder)
    index_dir, remount = mount
    root = tmp_path / "repo"
    write_files(root, {"a.py": "def settle_escrow():\n    return 1\n"})
    assert rag("index", str(root), "--index-path", str(index_dir)).returncode == 0
    (root / "b.py").write_text("def refund_escrow():\n    return 2\n")
    remount("ro")
    try:
        ran = rag("index", str(root), "--index-path", str(index_dir))
    finally:
        remount("rw")
    assert ran.returncode == 1
    assert "read-only file system" in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
