"""Crash consistency: `kill -9` at several points of indexing, then a normal run: no
duplicates, no orphan chunks, every file indexed, search answers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from .test_concurrent_writers import _assert_no_duplicates, _many_files, _rag_index, _table_rows


def test_kill_9_at_several_points_of_indexing_then_a_run_converges(tmp_path):
    root = tmp_path / "repo"
    _many_files(root, 50)
    for delay, extra in ((1.5, ()), (3.0, ()), (4.5, ("--full",)), (6.0, ())):
        run = _rag_index(root, *extra)
        time.sleep(delay)
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
        assert run.returncode == -signal.SIGKILL
    done = subprocess.run([sys.executable, "-m", "rag_lsp", "index", str(root), "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    _assert_no_duplicates(root / ".rag-lsp")
    assert len(_table_rows(root / ".rag-lsp", "chunks", "id")) == report["chunks_total"]
    indexed = set(_table_rows(root / ".rag-lsp", "files", "path"))
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*.py")} | {
        p.relative_to(root).as_posix() for p in root.rglob("*.md")} | {
        p.relative_to(root).as_posix() for p in root.rglob("*.js")}
    assert indexed == on_disk
    search = subprocess.run(
        [sys.executable, "-m", "rag_lsp", "search", "routing step 7 of module 2", "--root",
         str(root), "--json", "--mode", "lexical"], capture_output=True, text=True, timeout=300)
    assert search.returncode == 0 and json.loads(search.stdout)["results"], search.stderr
