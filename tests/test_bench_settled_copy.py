"""bench/settled_copy.py times searches with the in-memory copy as a re-index's patches left
it and with the compact copy the store makes of it once the writes settle, on a copy of a
``server_latency.py`` workdir. Run here on the sample workspace (real model, real LanceDB)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rag_lsp.config import Settings
from rag_lsp.server.client_settings import folder_index_dir
from rag_lsp.workspace import Workspace
from tests.conftest import SAMPLE_FILES, write_files

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "settled_copy.py"


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_both_copies_are_timed_on_a_copy_of_the_workdir_with_the_same_results(tmp_path,
                                                                            embedder):
    work = tmp_path / "work"
    root = work / "ws"
    write_files(root, SAMPLE_FILES)
    settings = {"indexPath": str(folder_index_dir(work / "index", root)),
                "embeddingCache": False}
    Workspace.open(root, Settings.from_dict(settings), embedder=embedder).index()
    texts = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    out = tmp_path / "out.json"
    done = run_bench("--workdir", str(work), "--rounds", "1", "--queries", "6",
                     "--rewrite", "0.1", "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert json.loads(out.read_text()) == result
    assert result["same_answers"]
    (round_,) = result["rounds"]
    assert "nothing_to_settle" not in round_, round_
    assert round_["answers_differ"] == 0
    before = round_["copy_before"]
    # What the patches left: rows masked out, replaced rows' vectors
    assert before["unsettled_share"] >= 0.05, before
    for way in ("patched", "settled"):
        assert set(round_["searches"][way]) == {"search", "vectorMs", "lexicalMs", "rankingMs"}
        assert round_["searches"][way]["search"]["p50"] > 0
    assert round_["settle_ms"] > 0
    # The workdir itself is left as it was (the bench rewrites files of its own copy).
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == texts


def test_a_workdir_without_an_index_or_a_share_out_of_range_is_refused(tmp_path):
    done = run_bench("--workdir", str(tmp_path))
    assert done.returncode == 2 and "server_latency.py --workdir" in done.stderr
    (tmp_path / "ws").mkdir()
    (tmp_path / "index" / "ws-0").mkdir(parents=True)
    (tmp_path / "index" / "ws-0" / "manifest.json").write_text("{}")
    done = run_bench("--workdir", str(tmp_path), "--rewrite", "0")
    assert done.returncode == 2 and "--rewrite is a share of the files" in done.stderr
