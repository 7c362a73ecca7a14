"""bench/fold_memory.py measures LanceDB's fold of a batch into a table's indexes in a
fresh process per variant, on a copy: every index, each one dropped, the full-text ones
dropped together. Run here on a table of a few dozen rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import lancedb
import pyarrow as pa
from lancedb.index import FTS

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "fold_memory.py"


def make_index(folder: Path, rows: int = 40) -> None:
    """A ``chunks`` table shaped like the store's where it matters here: ids, text in two
    full-text indexes, vectors."""
    data = pa.table({
        "id": [f"c{i}" for i in range(rows)],
        "search_text": [f"parse config value {i} tenant section" for i in range(rows)],
        "defines": [f"parse_{i}" for i in range(rows)],
        "vector": pa.array([[float(i % 7), 1.0, 0.5, float(i)] for i in range(rows)],
                           type=pa.list_(pa.float32(), 4)),
    })
    table = lancedb.connect(folder).create_table("chunks", data)
    table.create_index("search_text", config=FTS())
    table.create_index("defines", config=FTS(base_tokenizer="whitespace"))


def files_of(folder: Path) -> dict[str, int]:
    return {str(f.relative_to(folder)): f.stat().st_size
            for f in sorted(folder.rglob("*")) if f.is_file()}


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_each_variant_folds_batches_on_a_copy_with_its_indexes_dropped(tmp_path):
    make_index(tmp_path / "index")
    before = files_of(tmp_path / "index")
    out = tmp_path / "result.json"
    done = run_bench("--index-dir", str(tmp_path / "index"), "--rows", "8", "--rounds", "2",
                     "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert json.loads(out.read_text()) == result
    found = {name: v["indexes"] for name, v in result["variants"].items()}
    assert found == {
        "every index": ["defines_idx", "search_text_idx"],
        "without defines_idx": ["search_text_idx"],
        "without search_text_idx": ["defines_idx"],
        "without the full-text indexes": [],
    }
    for variant in result["variants"].values():
        assert variant["rows"] == 40
        assert variant["arrow_pool"] == "system"  # set up as the rag-lsp command is
        first, second = variant["rounds"]
        # each round appended a batch, then the fold committed a version of its own
        assert (first["appended"]["rows"], second["appended"]["rows"]) == (48, 56)
        assert first["folded"]["rows"] == 48 and second["folded"]["rows"] == 56
        for r in (first, second):
            assert r["folded"]["version"] > r["appended"]["version"]
            assert set(r["peak_kb"]) == {"VmRSS", "RssAnon", "RssFile"}
    # Without an ANN index a fold rewrites rows: the fragments its full-text indexes cover
    # alike are merged (the batch the fold itself indexes stays apart), and with no index at
    # all every fragment is
    layouts = {name: [(r["appended"]["fragments"], r["folded"]["fragments"])
                      for r in v["rounds"]] for name, v in result["variants"].items()}
    assert layouts["every index"] == [(2, 2), (3, 2)]
    assert layouts["without the full-text indexes"] == [(2, 1), (2, 1)]
    # the index itself is left as it was, file for file: copies were folded, not it
    assert files_of(tmp_path / "index") == before


def test_a_workdir_without_one_index_is_refused_with_how_to_make_one(tmp_path):
    (tmp_path / "ws").mkdir()
    done = run_bench("--workdir", str(tmp_path))
    assert done.returncode == 2
    assert "found 0" in done.stderr and "server_latency.py --workdir" in done.stderr


def test_more_rows_than_the_table_holds_is_refused_before_any_copy(tmp_path):
    make_index(tmp_path / "index", rows=10)
    done = run_bench("--index-dir", str(tmp_path / "index"), "--rows", "8", "--rounds", "2",
                     "--out", str(tmp_path / "result.json"))
    assert done.returncode == 2
    assert "holds 10 rows, fewer than --rows x --rounds (16): lower" in done.stderr
    assert "every index" not in done.stderr  # no variant was started
    assert not (tmp_path / "result.json").exists()


def test_the_table_folder_itself_is_pointed_at_its_parent(tmp_path):
    make_index(tmp_path / "index", rows=10)
    done = run_bench("--index-dir", str(tmp_path / "index" / "chunks.lance"))
    assert done.returncode == 2
    assert "name the folder that holds it" in done.stderr
