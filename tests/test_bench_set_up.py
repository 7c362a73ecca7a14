"""The benches set up the process they measure as the ``rag-lsp`` command does (glibc's
heaps, Arrow on the system allocator, LanceDB's read-ahead: ``rag_lsp.memory``) before pyarrow,
LanceDB or numpy load (bench/bench_basics.py). ``edit_memory.py``'s child once imported them
first, and held 464-466 MB after 40 rounds of saves where the server holds ~390."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Their measured child sets itself up first thing: importing the script must load nothing heavy.
CHILD_BENCHES = ("edit_memory", "engine_latency", "first_index_compactions", "fold_memory",
                 "retraining_searches", "search_while_indexing", "server_memory")
# These set up the process they run in as they are imported.
SET_UP_ON_IMPORT = ("reindex_memory", "replace_cost", "patch_cost", "hidden_refetch")
HEAVY = ("pyarrow", "lancedb", "numpy", "onnxruntime", "rag_lsp.workspace")


def run_after_import(bench: str, code: str) -> str:
    """``code``'s output, run right after ``import bench`` in a fresh interpreter whose
    environment sets nothing of the set-up beforehand."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ARROW_", "LANCE_", "MALLOC_", "GLIBC_TUNABLES"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "bench"), str(REPO)])
    done = subprocess.run([sys.executable, "-P", "-c", f"import sys\nimport {bench}\n{code}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.parametrize("bench", CHILD_BENCHES)
def test_a_bench_that_measures_a_child_imports_nothing_heavy_before_its_set_up(bench):
    loaded = run_after_import(bench, f"print([m for m in {HEAVY!r} if m in sys.modules])")
    assert loaded == "[]"


@pytest.mark.parametrize("bench", SET_UP_ON_IMPORT)
def test_a_bench_set_up_on_import_has_arrow_on_the_system_allocator(bench):
    backend = run_after_import(bench, "import pyarrow\nprint(pyarrow.default_memory_pool()"
                                      ".backend_name)")
    assert backend == "system"


def test_a_process_set_up_after_pyarrow_keeps_arrows_own_allocator():
    """The control: what the check above tells apart."""
    backend = run_after_import("pyarrow", "from rag_lsp import memory\nmemory.set_up_process()\n"
                                          "print(pyarrow.default_memory_pool().backend_name)")
    assert backend != "system"
