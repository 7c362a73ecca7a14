"""Reading a workspace file never follows a link out, even one swapped in mid-read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_lsp import confined
from rag_lsp.confined import NotAFileError, OutsideWorkspaceError, read_inside


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("inside\n")
    (outside / "pkg").mkdir(parents=True)
    (outside / "pkg" / "mod.py").write_text("SECRET\n")
    return root, outside


def _swap_after_resolving(monkeypatch: pytest.MonkeyPatch, swap) -> None:
    """Resolve as the code does, then change the tree before the file is opened: the
    moment a folder or file can be replaced by a link."""
    resolve = confined._parts_inside  # noqa: SLF001

    def resolve_then_swap(real_root: Path, rel: str) -> tuple[str, ...] | None:
        parts = resolve(real_root, rel)
        swap()
        return parts

    monkeypatch.setattr(confined, "_parts_inside", resolve_then_swap)


def test_a_folder_swapped_for_a_link_after_resolving_is_not_followed_out(
        tree, monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside = tree

    def swap() -> None:
        (root / "pkg").rename(root / "pkg-old")
        (root / "pkg").symlink_to(outside / "pkg", target_is_directory=True)

    _swap_after_resolving(monkeypatch, swap)
    with pytest.raises(OutsideWorkspaceError, match="a link took the place"):
        read_inside(root, "pkg/mod.py")


def test_a_file_swapped_for_a_link_after_resolving_is_not_followed_out(
        tree, monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside = tree

    def swap() -> None:
        (root / "pkg" / "mod.py").unlink()
        (root / "pkg" / "mod.py").symlink_to(outside / "pkg" / "mod.py")

    _swap_after_resolving(monkeypatch, swap)
    with pytest.raises(OutsideWorkspaceError):
        read_inside(root, "pkg/mod.py")


def test_a_folder_replaced_by_a_file_after_resolving_is_a_missing_file(
        tree, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = tree

    def swap() -> None:
        (root / "pkg").rename(root / "pkg-old")
        (root / "pkg").write_text("now a file\n")

    _swap_after_resolving(monkeypatch, swap)
    with pytest.raises(FileNotFoundError):  # not "a link took its place"
        read_inside(root, "pkg/mod.py")


def test_links_that_stay_inside_are_read_and_links_out_refused(tree) -> None:
    root, outside = tree
    (root / "alias").symlink_to(root / "pkg", target_is_directory=True)
    (root / "out").symlink_to(outside / "pkg", target_is_directory=True)
    assert read_inside(root, "alias/mod.py") == "inside\n"
    with pytest.raises(OutsideWorkspaceError, match="leads outside"):
        read_inside(root, "out/mod.py")


def test_a_root_spelled_through_a_link_reads_its_files(tree, tmp_path: Path) -> None:
    root, _ = tree
    (tmp_path / "ws-link").symlink_to(root, target_is_directory=True)
    assert read_inside(tmp_path / "ws-link", "pkg/../pkg/mod.py") == "inside\n"


def test_folders_and_fifos_are_refused_before_a_byte_is_read(tree) -> None:
    root, _ = tree
    os.mkfifo(root / "pipe")  # reading it would wait for a writer forever
    with pytest.raises(NotAFileError):
        read_inside(root, "pipe")
    with pytest.raises(NotAFileError):
        read_inside(root, "pkg")
    with pytest.raises(NotAFileError, match="workspace folder itself"):
        read_inside(root, ".")
