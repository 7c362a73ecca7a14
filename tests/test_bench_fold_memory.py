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


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_each_variant_folds_on_a_copy_with_its_indexes_dropped(tmp_path):
    make_index(tmp_path / "index")
    done = run_bench("--index-dir", str(tmp_path / "index"), "--rows", "8", "--rounds", "2",
                     "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    found = {name: v["indexes"] for name, v in result["variants"].items()}
    assert found == {
        "every index": ["defines_idx", "search_text_idx"],
        "without defines_idx": ["search_text_idx"],
        "without search_text_idx": ["defines_idx"],
        "without the full-text indexes": [],
    }
    for variant in result["variants"].values():
        assert variant["rows"] == 40
        assert len(variant["rounds"]) == 2
        for r in variant["rounds"]:
            assert r["peak_mb"]["VmRSS"] >= r["before_mb"]["VmRSS"] > 0
            assert r["seconds"] >= 0
    # the index itself is left as it was: copies were folded, not it
    table = lancedb.connect(tmp_path / "index").open_table("chunks")
    assert table.count_rows() == 40
    assert sorted(i.name for i in table.list_indices()) == ["defines_idx", "search_text_idx"]


def test_a_workdir_without_one_index_is_refused_with_how_to_make_one(tmp_path):
    (tmp_path / "ws").mkdir()
    done = run_bench("--workdir", str(tmp_path))
    assert done.returncode == 2
    assert "found 0" in done.stderr and "server_latency.py --workdir" in done.stderr


def test_more_rows_than_the_table_holds_is_a_clear_failure(tmp_path):
    make_index(tmp_path / "index", rows=10)
    done = run_bench("--index-dir", str(tmp_path / "index"), "--rows", "8", "--rounds", "2")
    assert done.returncode != 0
    assert "fewer than --rows x --rounds (16)" in done.stderr
