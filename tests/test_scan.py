"""Workspace scan on real files: ignore rules, default excludes, caps, and bad files."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from rag_lsp.config import Settings
from rag_lsp.indexing.file_text import read_for_index
from rag_lsp.indexing.scan import (
    FOLDER,
    FileContent,
    WorkspaceFilter,
    check_path,
    read_text_file,
    scan_folder,
    scan_workspace,
)


def make(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def scanned(root: Path, settings: Settings | None = None, **kw) -> list[str]:
    return [f.path for f in scan_workspace(root, settings or Settings(), **kw).files]


def assert_filter_agrees(root: Path, settings: Settings, **kw) -> None:
    """Every file on disk is included by the filter exactly when the scan found it."""
    found = set(scanned(root, settings, **kw))
    rules = WorkspaceFilter(root, settings, **kw)
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            rel = Path(dirpath, name).relative_to(root).as_posix()
            assert rules.includes(rel) == (rel in found), rel


def test_nested_gitignore_with_negation_and_anchors(tmp_path):
    make(tmp_path, {
        ".gitignore": "*.log.py\n/top_only.py\ngenerated/\n!keep.log.py\n",
        "top_only.py": "", "sub/top_only.py": "",  # anchored: only the root one is ignored
        "a.log.py": "", "keep.log.py": "", "sub/b.log.py": "",
        "generated/x.py": "", "sub/generated/y.py": "",
        "sub/.gitignore": "local.py\n!b.log.py\n/anchored.py\n",
        "sub/local.py": "", "local.py": "", "sub/anchored.py": "", "sub/deep/anchored.py": "",
        "main.py": "",
    })
    assert scanned(tmp_path) == [
        "keep.log.py", "local.py", "main.py",
        "sub/b.log.py",  # re-included by the nested .gitignore
        "sub/deep/anchored.py", "sub/top_only.py",
    ]
    assert_filter_agrees(tmp_path, Settings())
    # with gitignore off, only built-in rules apply
    assert len(scanned(tmp_path, Settings(use_gitignore=False))) == 12


def test_a_gitignore_line_git_cannot_read_is_skipped_with_a_warning(tmp_path, caplog):
    # git takes these in its stride (it skips the line); pathspec raised on them, and a
    # repository holding one could never be indexed.
    make(tmp_path, {
        ".gitignore": "build/\n[z-a]\n\\\n*.log.py\n",
        "sub/.gitignore": "!\nlocal.py\n",
        "build/x.py": "", "a.log.py": "", "sub/local.py": "", "main.py": "", "sub/ok.py": "",
    })
    assert scanned(tmp_path) == ["main.py", "sub/ok.py"]  # the other lines still apply
    assert_filter_agrees(tmp_path, Settings())
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert any(".gitignore:2: skipped '[z-a]'" in m for m in skipped)
    assert any("sub/.gitignore:1: skipped '!'" in m for m in skipped)


def test_git_info_exclude_and_excluded_dir_cannot_be_reincluded(tmp_path):
    make(tmp_path, {
        ".git/info/exclude": "secret.py\n",
        ".gitignore": "out/\n!out/keep.py\n",
        "secret.py": "", "out/keep.py": "", "ok.py": "",
    })
    assert scanned(tmp_path) == ["ok.py"]
    report = scan_workspace(tmp_path, Settings())
    assert "out/" in report.skipped["excluded"] and ".git/" in report.skipped["excluded"]


@pytest.mark.parametrize("layout", ["worktree", "submodule"])
def test_info_exclude_of_a_worktree_or_submodule_is_found_through_its_gitdir(tmp_path, layout,
                                                                           caplog):
    """In a linked worktree or a submodule `.git` is a file; its exclude rules still apply,
    and reading them warns about nothing."""
    main_git = tmp_path / "main" / ".git"
    root = tmp_path / "checkout"
    if layout == "worktree":
        git_dir = main_git / "worktrees" / "checkout"
        make(git_dir, {"commondir": "../..\n"})
        make(main_git, {"info/exclude": "secret.py\n"})
    else:
        git_dir = main_git / "modules" / "checkout"
        make(git_dir, {"info/exclude": "secret.py\n"})
    make(root, {".git": f"gitdir: {os.path.relpath(git_dir, root)}\n",
                "secret.py": "", "ok.py": ""})
    assert scanned(root) == ["ok.py"]
    assert "cannot read" not in caplog.text


def test_default_excludes(tmp_path):
    make(tmp_path, {
        "node_modules/pkg/index.js": "", "myenv/pyvenv.cfg": "home = /usr", "myenv/lib/x.py": "",
        ".venv/lib/y.py": "", "env/real_code.py": "",  # "env" without pyvenv.cfg is just a folder
        "pkg/__pycache__/m.py": "", "build/gen.py": "", "dist/d.js": "", "target/t.rs": "",
        "a.egg-info/PKG.txt": "", ".rag-lsp/meta.json": "", ".mypy_cache/c.json": "",
        "src/app.py": "", ".github/workflows/ci.yml": "",
    })
    assert scanned(tmp_path) == [".github/workflows/ci.yml", "env/real_code.py", "src/app.py"]
    rules = WorkspaceFilter(tmp_path, Settings())
    assert not rules.includes("myenv", is_dir=True) and not rules.includes("myenv/lib/x.py")
    assert_filter_agrees(tmp_path, Settings())


def test_lock_files_are_not_indexed(tmp_path):
    make(tmp_path, {"package-lock.json": "{}", "web/yarn.lock": "x", "poetry.lock": "x",
                    "package.json": "{}", "src/lock.py": "LOCK = 1"})
    assert scanned(tmp_path) == ["package.json", "src/lock.py"]
    assert_filter_agrees(tmp_path, Settings())
    assert check_path(WorkspaceFilter(tmp_path, Settings()), "package-lock.json") == "excluded"


def test_index_dir_anywhere_under_root_is_excluded(tmp_path):
    make(tmp_path, {"var/idx/data.json": "{}", "var/other.json": "{}"})
    assert scanned(tmp_path, index_dir=tmp_path / "var" / "idx") == ["var/other.json"]
    assert scanned(tmp_path, Settings(index_path="var/idx")) == ["var/other.json"]


def test_configured_excludes(tmp_path):
    make(tmp_path, {
        "docs/gen/a.md": "", "docs/b.md": "", "x.min.js": "", "x.js": "",
        "vendor/lib.py": "", "vendor/keep.py": "",
    })
    settings = Settings(exclude=("docs/gen/", "*.min.js", "vendor/*", "!vendor/keep.py"))
    assert scanned(tmp_path, settings) == ["docs/b.md", "vendor/keep.py", "x.js"]
    assert_filter_agrees(tmp_path, settings)


def test_extension_filter_is_case_insensitive(tmp_path):
    make(tmp_path, {"a.PY": "", "b.md": "", "c.bin": "", "Makefile": "", ".bashrc": ""})
    assert scanned(tmp_path, Settings(extensions=(".py",))) == ["a.PY"]
    assert scanned(tmp_path, Settings(extensions=(".Md", ".py"))) == ["a.PY", "b.md"]


def test_size_cap(tmp_path):
    make(tmp_path, {"big.py": "x" * 101, "small.py": "x" * 100})
    report = scan_workspace(tmp_path, Settings(max_file_bytes=100))
    assert [f.path for f in report.files] == ["small.py"]
    assert report.skipped["too-large"] == ["big.py"]
    small = report.files[0]
    assert small.size == 100 and small.abs_path == (tmp_path / "small.py").resolve()
    assert small.mtime_ns == (tmp_path / "small.py").stat().st_mtime_ns
    assert read_text_file(tmp_path / "big.py", 100) == "too-large"


def test_symlinks(tmp_path):
    make(tmp_path, {"real/a.py": "print(1)", "outside/o.py": ""})
    root = tmp_path / "ws"
    make(root, {"src/a.py": ""})
    (root / "src" / "loop").symlink_to(root, target_is_directory=True)  # dir -> its ancestor
    (root / "alias.py").symlink_to(root / "src" / "a.py")
    (root / "escape.py").symlink_to(tmp_path / "outside" / "o.py")
    (root / "broken.py").symlink_to(root / "nope.py")
    os.mkfifo(root / "pipe")
    (root / "pipe.py").symlink_to(root / "pipe")  # a link to no file, but to something
    report = scan_workspace(root, Settings())
    assert [f.path for f in report.files] == ["alias.py", "src/a.py"]
    assert report.skipped["symlink-dir"] == ["src/loop"]
    assert report.skipped["symlink-outside-root"] == ["escape.py"]
    assert report.skipped["broken-symlink"] == ["broken.py"]
    assert report.skipped["symlink-not-a-file"] == ["pipe.py"]


def test_names_that_are_not_utf8_are_skipped_and_reported(tmp_path):
    make(tmp_path, {"good.py": "x = 1"})
    bad_file = os.path.join(os.fsencode(tmp_path), b"bad\xff.py")
    bad_dir = os.path.join(os.fsencode(tmp_path), b"pkg\xfe")
    os.mkdir(bad_dir)
    for path in (bad_file, os.path.join(bad_dir, b"inner.py")):
        with open(path, "w") as f:
            f.write("y = 2\n")
    report = scan_workspace(tmp_path, Settings())
    assert [f.path for f in report.files] == ["good.py"]
    assert sorted(report.skipped["undecodable-name"]) == ["bad\ufffd.py", "pkg\ufffd"]
    rules = WorkspaceFilter(tmp_path, Settings())
    assert check_path(rules, os.fsdecode(bad_file).rsplit("/", 1)[1]) == "undecodable-name"


def test_read_text_binary_utf8_crlf(tmp_path):
    make(tmp_path, {
        "bin.py": b"abc\x00def",
        "late_nul.txt": b"a" * 9000 + b"\x00",  # NUL after the sniffed prefix: still text
        "bad.py": b"ok \xff\xfe end\n",
        "crlf.py": b"\xef\xbb\xbfa\r\nb\rc\n",
    })
    assert read_text_file(tmp_path / "bin.py", 1000) == "binary"
    assert isinstance(read_text_file(tmp_path / "late_nul.txt", 10_000), FileContent)
    bad = read_text_file(tmp_path / "bad.py", 1000)
    assert isinstance(bad, FileContent) and bad.had_invalid_utf8
    assert bad.text == "ok \ufffd\ufffd end\n"
    crlf = read_text_file(tmp_path / "crlf.py", 1000)
    assert isinstance(crlf, FileContent) and not crlf.had_invalid_utf8
    assert crlf.text == "a\nb\nc\n"
    assert crlf.sha256 == hashlib.sha256(b"\xef\xbb\xbfa\r\nb\rc\n").hexdigest()


def test_unreadable_and_missing_files_give_reasons(tmp_path, monkeypatch, caplog):
    make(tmp_path, {"locked.py": "x", "fine.py": "y"})
    locked = tmp_path / "locked.py"

    real_open = os.open

    def fake_open(path, *args, **kwargs):
        if Path(path) == locked or (path == "locked.py" and kwargs.get("dir_fd")):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)
    assert read_text_file(locked, 1000) == "unreadable: Permission denied"
    assert read_text_file(locked, 1000, tmp_path) == "unreadable: Permission denied"
    assert "locked.py" in caplog.text
    assert isinstance(read_text_file(tmp_path / "fine.py", 1000), FileContent)
    assert read_text_file(tmp_path / "gone.py", 1000) == "missing"
    assert read_text_file(tmp_path, 1000) == "unreadable: not a regular file"


def test_a_file_made_a_link_out_after_the_scan_is_not_read(tmp_path):
    """The scan refuses links out; a file swapped for one before its read (a race the scan
    cannot see) is refused by the read. Links inside are still read."""
    make(tmp_path, {"ws/a.py": "A = 1\n", "ws/inside.py": "INSIDE = 1\n",
                    "outside/secret.py": "SECRET = 1\n"})
    (tmp_path / "ws/b.py").symlink_to(tmp_path / "ws/inside.py")
    found = {f.path: f for f in scan_workspace(tmp_path / "ws", Settings()).files}
    assert sorted(found) == ["a.py", "b.py", "inside.py"]
    (tmp_path / "ws/a.py").unlink()
    (tmp_path / "ws/a.py").symlink_to(tmp_path / "outside/secret.py")
    assert read_for_index(found["a.py"], Settings())[0] == "symlink-outside-root"
    assert read_for_index(found["b.py"], Settings())[0].text == "INSIDE = 1\n"


def test_rules_files_that_are_fifos_or_endless_do_not_hang_the_scan(tmp_path, caplog):
    make(tmp_path, {"a.py": "", "sub/b.py": ""})
    os.mkfifo(tmp_path / ".gitignore")  # reading it waits for a writer forever
    (tmp_path / "sub/.gitignore").symlink_to("/dev/zero")  # never ends
    (tmp_path / ".git").write_text("gitdir: gd\n")  # a worktree's .git, and its commondir
    (tmp_path / "gd").mkdir()
    os.mkfifo(tmp_path / "gd/commondir")
    found: list[list[str]] = []
    scan_thread = threading.Thread(target=lambda: found.append(scanned(tmp_path)), daemon=True)
    scan_thread.start()
    scan_thread.join(timeout=30)
    assert found == [["a.py", "sub/b.py"]], "the scan hung on a rules file"
    assert "not a regular file" in caplog.text


def test_fifo_is_not_read(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(tmp_path / "pipe.py")
    assert scanned(tmp_path) == []
    assert read_text_file(tmp_path / "pipe.py", 1000) == "unreadable: not a regular file"


def test_filter_paths_and_rule_changes(tmp_path):
    make(tmp_path, {"a/b.py": "", ".gitignore": ""})
    rules = WorkspaceFilter(tmp_path, Settings())
    assert rules.includes("a/b.py") and rules.includes("./a/b.py")
    assert not rules.includes("../x.py") and not rules.includes("")
    assert rules.relative(tmp_path / "a" / "b.py") == "a/b.py"
    assert rules.relative(tmp_path.parent / "elsewhere.py") is None
    assert rules.is_rule_file("a/.gitignore") and not rules.is_rule_file("a/b.py")
    (tmp_path / "a" / ".gitignore").write_text("b.py\n")
    rules.forget("a/.gitignore")
    assert not rules.includes("a/b.py")


def test_a_folder_is_a_folder_to_scan_unless_excluded(tmp_path):
    make(tmp_path, {"src/a.py": "x = 1", "node_modules/m/i.js": "x", "docs/b.md": "# b"})
    (tmp_path / "link").symlink_to(tmp_path / "src")
    rules = WorkspaceFilter(tmp_path, Settings())
    assert check_path(rules, "src") == FOLDER
    assert check_path(rules, "node_modules") == "excluded"
    assert check_path(rules, "link") == "missing"  # scans follow no folder link
    assert check_path(rules, "gone") == "missing"
    assert [f.path for f in scan_folder(rules, "src").files] == ["src/a.py"]
    assert scan_folder(rules, "").files == scan_workspace(tmp_path, Settings()).files
