"""A full disk during indexing: a clear "no space" error (not "damaged, rebuild"), nothing
half-written, and the next run completes once there is space again.

The real test indexes onto a small tmpfs (needs permission to mount, as root in a container
has); the injected one makes LanceDB's write fail the way it does on a full disk, anywhere.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import lancedb
import pytest

from rag_lsp.config import Settings
from rag_lsp.errors import DiskFullError
from rag_lsp.store import lance_store
from rag_lsp.workspace import Workspace

from .conftest import mounted_tmpfs, write_files


def _files(count: int) -> dict[str, str]:
    return {f"pkg/m{n}.py": "\n\n".join(
        f"def f_{n}_{k}(x):\n    '''Step {k} of {n}: {'lorem ipsum ' * 12}'''\n    return x + {k}\n"
        for k in range(30)) for n in range(count)}


def _ids(index_dir: Path) -> list[str]:
    return lancedb.connect(str(index_dir)).open_table("chunks").to_arrow() \
        .column("id").to_pylist()


@pytest.fixture
def small_disk(tmp_path):
    with mounted_tmpfs(tmp_path / "small", "1m",
                       "the injected disk-full test covers the mapping") as point:
        yield point


def test_indexing_onto_a_full_disk_says_so_and_recovers(tmp_path, small_disk, embedder):
    root = tmp_path / "repo"
    write_files(root, _files(40))
    index_dir = small_disk / "index"
    ws = Workspace.open(root, Settings.from_dict({"indexPath": str(index_dir)}),
                        embedder=embedder)
    with pytest.raises(DiskFullError, match="no space left"):
        ws.index()
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    report = Workspace.open(root, Settings.from_dict({"indexPath": str(index_dir)}),
                            embedder=embedder).index()
    ids = _ids(index_dir)
    assert report.files_scanned == 40 and len(ids) == report.chunks_total
    assert [i for i, n in Counter(ids).items() if n > 1] == []


def test_a_write_failing_for_lack_of_space_is_reported_as_disk_full(sample_root, embedder,
                                                                     monkeypatch):
    ws = Workspace.open(sample_root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    before = len(_ids(ws.index_dir))
    (sample_root / "src" / "new.py").write_text("def brand_new():\n    return 1\n")

    def no_space(self, *args, **kwargs):
        raise RuntimeError("LanceError(IO): Generic LocalFileSystem error: No space left on "
                           "device (os error 28)")

    monkeypatch.setattr(lance_store.ChunkStore, "replace_files",
                        lance_store._reports_damage(no_space))
    with pytest.raises(DiskFullError) as error:
        ws.update(["src/new.py"])
    assert "damaged" not in str(error.value) and "Free some space" in str(error.value)
    monkeypatch.undo()
    assert len(_ids(ws.index_dir)) == before  # nothing half-written
    assert ws.search("follow_redirects", mode="lexical").results  # still serves
    ws.update(["src/new.py"])
    assert "src/new.py" in {h.path for h in ws.search("brand_new", mode="lexical").results}
