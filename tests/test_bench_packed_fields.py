"""bench/packed_fields.py times searches that read their rows from LanceDB with the packed
fields and with the separate columns, on a copy of a ``server_latency.py`` workdir. Run here
on the sample workspace read as a large index (real model, real LanceDB)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import lancedb

from rag_lsp.config import Settings
from rag_lsp.server.client_settings import folder_index_dir
from rag_lsp.store.packed_fields import PACKED_COLUMN
from rag_lsp.workspace import Workspace
from tests.conftest import SAMPLE_FILES, write_files

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "packed_fields.py"


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_both_ways_are_timed_with_the_same_results_and_an_older_index_given_the_column(
        tmp_path, embedder):
    work = tmp_path / "work"
    root = work / "ws"
    write_files(root, SAMPLE_FILES)
    index = folder_index_dir(work / "index", root)
    settings = {"indexPath": str(index), "embeddingCache": False}
    Workspace.open(root, Settings.from_dict(settings), embedder=embedder).index()
    lancedb.connect(index).open_table("chunks").drop_columns([PACKED_COLUMN])  # an older index
    files = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    out = tmp_path / "out.json"
    done = run_bench("--workdir", str(work), "--rounds", "1", "--queries", "6",
                     "--no-memory-copy", "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert json.loads(out.read_text()) == result
    assert result["same_answers"]
    assert result["column_added"]["seconds"] > 0 and result["column_added"]["bytes_added"] > 0
    (round_,) = result["rounds"]
    assert round_["answers_differ"] == 0 and round_["queries"] == 6
    # Each way read as it is named: LanceDB answered, from the packed column or not
    assert round_["rows_read_packed"]["columns"] == 0 < round_["rows_read_packed"]["packed"]
    assert result["each_way_as_named"]
    for way in ("columns", "packed"):
        parts = round_["searches"][way]
        assert set(parts) == {"search", "cpu", "vectorMs", "lexicalMs"}
        assert parts["search"]["p50"] > 0 and parts["vectorMs"]["p50"] > 0
    # The workdir itself is left as it was (the column goes into the bench's own copy).
    assert {p: p.read_bytes() for p in work.rglob("*") if p.is_file()} == files


def test_a_small_index_or_a_workdir_without_one_is_refused(tmp_path, embedder):
    done = run_bench("--workdir", str(tmp_path))
    assert done.returncode == 2 and "server_latency.py --workdir" in done.stderr
    work = tmp_path / "work"
    write_files(work / "ws", SAMPLE_FILES)
    settings = {"indexPath": str(folder_index_dir(work / "index", work / "ws")),
                "embeddingCache": False}
    Workspace.open(work / "ws", Settings.from_dict(settings), embedder=embedder).index()
    done = run_bench("--workdir", str(work), "--queries", "2")
    assert done.returncode == 1 and "answered from the in-memory copy" in done.stderr
