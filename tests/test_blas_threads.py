"""NumPy's BLAS runs on one thread in a process that opened a workspace, unless the user set
the thread count (rag_lsp/blas_threads.py; measured in bench/blas_threads.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rag_lsp.blas_threads import USER_SETTINGS

# Opens a real workspace (no model needed: lexical search works without one) and reports the
# BLAS thread count before and after.
PROBE = """
import json, sys
import numpy
from threadpoolctl import threadpool_info
from rag_lsp import Workspace
from rag_lsp.config import Settings
def blas():
    return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
before = blas()
Workspace.open(sys.argv[1], Settings.from_dict({"indexPath": sys.argv[2]}))
print(json.dumps({"before": before, "after": blas()}))
"""


def _probe(tmp_path, **env_overrides) -> dict:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    (root / "a.py").write_text("def f():\n    return 1\n")
    env = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS}
    env.update(env_overrides)
    done = subprocess.run([sys.executable, "-c", PROBE, str(root), str(tmp_path / "index")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _needs_threaded_blas(threads: dict) -> None:
    if not threads["before"]:
        pytest.skip("threadpoolctl finds no BLAS library in NumPy here")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: BLAS runs one thread anyway")


def test_opening_a_workspace_leaves_blas_one_thread(tmp_path):
    threads = _probe(tmp_path)
    _needs_threaded_blas(threads)
    assert threads["before"] != [1] and threads["after"] == [1]


@pytest.mark.parametrize("name", ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"])
def test_a_thread_count_the_user_set_is_kept(tmp_path, name):
    threads = _probe(tmp_path, **{name: "2"})
    _needs_threaded_blas(threads)
    assert threads["before"] == threads["after"] == [2]
