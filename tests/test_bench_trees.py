"""The benches' copy of a repository's tree at a revision (bench/codebench/data.py:
``sync_tree``), which ``server_on_repo.py`` switches as a ``git checkout`` would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from codebench.data import sync_tree  # noqa: E402


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def commit(work: Path, files: dict[str, str | None]) -> str:
    """Write (or, for None, delete) ``files`` in ``work`` and commit them; the commit id."""
    for path, text in files.items():
        target = work / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "change", cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


def test_a_tree_is_switched_as_a_checkout_would_leave_it(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    first = commit(work, {"src/a.py": "a = 1\n", "src/b.py": "b = 1\n", "docs/x.md": "# x\n",
                          "other/c.py": "c = 1\n"})
    second = commit(work, {"src/a.py": "a = 2\n", "src/b.py": None, "src/new.py": "n = 1\n",
                           "docs/x.md": "# x\n"})
    mirror = work / ".git"
    dest = tmp_path / "ws"
    dest.mkdir()

    made = sync_tree(mirror, first, ["src", "docs"], dest)
    assert made == {"written": 3, "removed": 0, "kept": 0, "missing": 0}
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "docs/x.md", "src/a.py", "src/b.py"]  # only the paths asked for

    switched = sync_tree(mirror, second, ["src", "docs"], dest)
    assert switched == {"written": 2, "removed": 1, "kept": 1, "missing": 0}
    assert (dest / "src/a.py").read_text() == "a = 2\n"
    assert not (dest / "src/b.py").exists()
    assert (dest / "src/new.py").read_text() == "n = 1\n"


def test_a_blob_the_mirror_lacks_is_left_out_and_counted(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    revision = commit(work, {"a.txt": "kept\n", "big.bin": "stands for a large file\n"})
    blob = git("rev-parse", f"{revision}:big.bin", cwd=work)
    (work / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # as a mirror without it
    dest = tmp_path / "ws"
    dest.mkdir()

    assert sync_tree(work / ".git", revision, [], dest) == {
        "written": 1, "removed": 0, "kept": 0, "missing": 1}
    assert (dest / "a.txt").read_text() == "kept\n"
    assert not (dest / "big.bin").exists()
