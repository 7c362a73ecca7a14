"""The server's structure: features see a narrow interface, and the server provides it."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag_lsp.server.main import build_server
from rag_lsp.server.state import ServerState

ROOT = Path(__file__).resolve().parent.parent


def test_the_server_provides_everything_features_may_use():
    server = build_server()
    declared = set(ServerState.__annotations__) | {
        name for name, _ in inspect.getmembers(ServerState) if not name.startswith("_")}
    # on the class (properties such as pygls's client_capabilities only answer after
    # initialize) or set on the instance
    missing = sorted(name for name in declared
                     if not hasattr(type(server), name) and name not in vars(server))
    assert missing == []


def test_no_import_cycles():
    tool = ROOT.parent / "shared" / "tools" / "import_cycles.py"
    if not tool.is_file():
        pytest.skip(f"{tool} is not beside this checkout (it is on the team's machines)")
    cycles = subprocess.run([sys.executable, str(tool), "rag_lsp"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    assert "cycle" not in cycles, cycles


def test_small_server_modules():
    for module in (ROOT / "rag_lsp" / "server").rglob("*.py"):
        lines = len(module.read_text(encoding="utf-8").splitlines())
        assert lines < 250, f"{module.relative_to(ROOT)} has {lines} lines"
    for feature in (ROOT / "rag_lsp" / "server" / "features").glob("*.py"):
        assert "rag_lsp.server.app" not in feature.read_text(encoding="utf-8"), feature


def packages_loaded(modules: str, packages: tuple[str, ...]) -> list[str]:
    """Which of ``packages`` a fresh interpreter holds once it has imported ``modules``."""
    probe = (f"import json, sys, {modules}; print(json.dumps(sorted("
             f"{{m.split('.')[0] for m in sys.modules}} & {set(packages)!r})))")
    return json.loads(subprocess.run([sys.executable, "-c", probe], cwd=ROOT,
                                     capture_output=True, text=True, check=True).stdout)


def test_the_server_answers_initialize_before_loading_the_engine():
    """LanceDB, pyarrow, numpy and onnxruntime take seconds to import: they load with the
    model and the first folder, after `initialize` is answered, never with the server. Nor do
    jsonschema (settings and params are checked later) and rich (the CLI's console), ~90 ms
    together."""
    assert packages_loaded("rag_lsp.cli.main, rag_lsp.server.main", (
        "lancedb", "pyarrow", "numpy", "onnxruntime", "tokenizers", "jsonschema", "rich")) == []


def test_the_early_answer_loads_no_pygls():
    """What `rag-lsp serve` imports before it answers `initialize` (``early_answer``): the CLI
    and that module, not pygls or lsprotocol (about 0.3 s of the start)."""
    assert packages_loaded("rag_lsp.cli.main, rag_lsp.server.early_answer",
                           ("pygls", "lsprotocol", "cattrs", "attrs")) == []
