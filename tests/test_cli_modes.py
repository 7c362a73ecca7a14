"""`rag-lsp context` and `rag-lsp kb`: what they print and how they exit (real model), run
through ``main()`` in this process (``inprocess_cli``); ``test_cli`` runs the real process."""

from __future__ import annotations

import json

import pytest

from .conftest import make_sample_root
from .inprocess_cli import rag, share_model


@pytest.fixture(scope="module")
def repo(tmp_path_factory, embedder):
    root = make_sample_root(tmp_path_factory.mktemp("cli-modes"))
    with pytest.MonkeyPatch.context() as patch:
        share_model(patch, embedder)
        assert rag("index", str(root)).returncode == 0
    return root


@pytest.fixture(autouse=True)
def _shared_model(monkeypatch, embedder):
    share_model(monkeypatch, embedder)


def test_context_prints_attributed_markdown_within_the_budget(repo):
    done = rag("context", "--mode", "security", "--budget", "600", "--root", str(repo),
               "--manual", f"{repo}/src/cache/lru.py:1-3", "--json", "how are passwords hashed?")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["totalTokens"] <= 600 * 0.9
    assert [i["source"] for i in result["items"]][:2] == ["manual", "codebase"]
    assert result["items"][1]["path"] == "src/auth/passwords.py"
    assert "```python src/auth/passwords.py:L" in result["context"]

    plain = rag("context", "--mode", "security", "--budget", "600", "--root", str(repo),
                "how are passwords hashed?")
    assert plain.stdout.startswith("### codebase: ") and "tokens" in plain.stderr


def test_knowledge_base_commands(repo):
    added = rag("kb", "add", "--mode", "performance", "--root", str(repo), "--title", "LRU",
                "--anchor", f"{repo}/src/cache/lru.py:1-5", "--json", "The cache evicts in O(1).")
    assert added.returncode == 0, added.stderr
    entry = json.loads(added.stdout)
    assert entry["anchors"][0]["path"] == "src/cache/lru.py"

    found = json.loads(rag("kb", "search", "--mode", "performance", "--root", str(repo),
                           "--json", "how fast is eviction?").stdout)
    assert found["entries"][0]["id"] == entry["id"]
    listed = rag("kb", "list", "--mode", "performance", "--root", str(repo))
    assert entry["id"] in listed.stdout
    future = json.loads(rag("kb", "list", "--mode", "performance", "--root", str(repo),
                            "--since", "2999-01-01", "--json").stdout)
    assert future == {"entries": [], "total": 0}
    assert rag("kb", "delete", "--mode", "performance", "--root", str(repo),
               entry["id"]).returncode == 0
    cleared = json.loads(rag("kb", "clear", "--mode", "performance", "--root", str(repo),
                             "--json").stdout)
    assert cleared == {"removed": 0}


def test_unknown_mode_and_bad_times_are_explained(repo):
    unknown = rag("kb", "list", "--mode", "cooking", "--root", str(repo))
    assert unknown.returncode == 1
    assert "unknown mode 'cooking'; valid modes: debugger, security" in unknown.stderr
    bad_time = rag("kb", "list", "--mode", "planning", "--root", str(repo), "--since", "soon")
    assert bad_time.returncode == 1 and "ISO 8601" in bad_time.stderr


@pytest.mark.parametrize(("args", "says"), [
    (["context", "--mode", "debugger", "--budget", "0", "q"],
     "argument --budget: must be at least 1 (got 0)"),
    (["kb", "search", "--mode", "debugger", "q", "--threshold", "2"],
     "argument --threshold: must be a number from -1 to 1 (got 2)"),
    (["kb", "search", "--mode", "debugger", "q", "--threshold", "nan"],
     "argument --threshold: must be a number from -1 to 1 (got nan)"),
    (["kb", "search", "--mode", "debugger", "q", "-k", "0"],
     "argument -k/--top-k: must be at least 1 (got 0)"),
    (["kb", "list", "--mode", "debugger", "--offset", "-1"],
     "argument --offset: must be at least 0 (got -1)"),
    (["context", "q"], "the following arguments are required: --mode"),
])
def test_usage_errors_name_the_flag_and_are_json_when_asked(repo, args, says):
    plain = rag(*args, "--root", str(repo))
    assert plain.returncode == 2 and says in plain.stderr and plain.stdout == ""
    scripted = rag(*args, "--root", str(repo), "--json")
    assert scripted.returncode == 2 and says in json.loads(scripted.stdout)["error"]


def test_a_line_range_is_checked_and_named_by_its_flag(repo):
    for flag in ("--file", "--manual"):
        proc = rag("context", "--mode", "debugger", "--root", str(repo), flag,
                   str(repo / "src/http/client.py:9-3"))
        assert proc.returncode == 1
        assert f"{flag} '{repo}/src/http/client.py:9-3': lines are numbered from 1" in proc.stderr
    proc = rag("context", "--mode", "debugger", "--root", str(repo), "--file",
               str(repo / "src/http/client.py:0-0"))
    assert proc.returncode == 1 and "lines are numbered from 1" in proc.stderr


def test_verbose_after_the_command_too(repo):
    for args in (["-v", "context", "--mode", "debugger"], ["context", "-v", "--mode", "debugger"]):
        proc = rag(*args, "--root", str(repo), "where are redirects followed?")
        assert proc.returncode == 0 and "context for debugger mode" in proc.stderr
    quiet = rag("context", "--mode", "debugger", "--root", str(repo), "redirects")
    assert "context for debugger mode" not in quiet.stderr
