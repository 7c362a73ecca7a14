"""The `rag-lsp` command: real model, real index. A command's behaviour is checked through
``main()`` in this process (``inprocess_cli``); the command as a shell runs it — a real
process, its exit status, stdout and stderr — in the subprocess tests (``rag_process``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import make_sample_root
from .inprocess_cli import rag, share_model

RESULT_KEYS = {"path", "start_line", "end_line", "score", "kind", "symbol", "language",
               "ranges", "snippet"}


def rag_process(*args: str, env: dict[str, str] | None = None,
                stdin: str | None = None) -> subprocess.CompletedProcess:
    """``rag-lsp ARGS`` in a new process, as a shell runs it."""
    return subprocess.run([sys.executable, "-m", "rag_lsp", *args], capture_output=True,
                          text=True, timeout=300, env=env, input=stdin)


@pytest.fixture
def cli(monkeypatch, embedder):
    """Run a command in this process (with the session's model)."""
    share_model(monkeypatch, embedder)
    return rag


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_sample_root(tmp_path_factory.mktemp("cli"))


def test_search_without_index_indexes_first_and_prints_json(sample_root):
    proc = rag_process("search", "where are redirects followed?", "--root", str(sample_root),
                       "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert set(payload) >= {"query", "took_ms", "results"}
    assert payload["query"] == "where are redirects followed?"
    assert isinstance(payload["took_ms"], float)
    top = payload["results"][0]
    assert set(top) == RESULT_KEYS
    assert top["path"] == "src/http/client.py"
    assert isinstance(top["start_line"], int) and top["start_line"] >= 1
    assert top["end_line"] >= top["start_line"]
    assert isinstance(top["score"], float) and 0 < top["score"] <= 1
    first = top["ranges"][0]  # the best range; the file's score adds its other ranges
    assert (first["start_line"], first["end_line"]) == (top["start_line"], top["end_line"])
    assert 0 < first["score"] <= top["score"]
    assert "indexing" in proc.stderr


def test_index_off_a_terminal_prints_plain_progress_lines(tmp_path):
    """A pipe (a CI log, `make demo | tee`) gets lines, not a bar it cannot redraw."""
    # (rich takes a pipe for a terminal when these ask it to: a CI log may set them)
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    proc = rag_process("index", str(make_sample_root(tmp_path)), env=env)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^rag-lsp: indexing \d+%: \d+ of \d+ files, .* \(\d+:\d\d\)$",
                     proc.stderr, re.MULTILINE), proc.stderr
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr  # no redraws, no colours
    assert "files scanned" in proc.stdout and "rag-lsp:" not in proc.stdout


def test_index_prints_a_summary_and_reuses_everything_next_time(cli, repo):
    cli("index", str(repo))
    proc = cli("index", str(repo))
    assert proc.returncode == 0, proc.stderr
    assert "files scanned" in proc.stdout
    assert re.search(r"chunks in the index; 0 embedded", proc.stdout), proc.stdout
    proc = cli("index", str(repo), "--json")
    report = json.loads(proc.stdout)
    assert report["files_unchanged"] == 5 and report["chunks_embedded"] == 0


def test_batch_search_prints_one_line_per_query(cli, repo, tmp_path):
    batch = tmp_path / "queries.jsonl"
    batch.write_text(
        '{"id": "q1", "query": "hash a password"}\n'
        '{"id": 2, "query": "debounce a function"}\n'
        "not json\n",
        encoding="utf-8",
    )
    proc = cli("search", "--batch", str(batch), "--root", str(repo), "--json", "-k", "2")
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["q1", 2, None]
    assert lines[0]["results"][0]["path"] == "src/auth/passwords.py"
    assert lines[1]["results"][0]["path"] == "web/static/app.js"
    assert len(lines[0]["results"]) <= 2
    assert "not JSON" in lines[2]["error"] and ":3:" in lines[2]["error"]
    assert proc.returncode == 1  # one query failed


def test_batch_lines_that_are_not_queries_say_where(cli, repo, tmp_path):
    batch = tmp_path / "queries.jsonl"
    batch.write_text('{"id": NaN, "query": "redirects"}\n{"id": 2, "query": "   "}\n')
    proc = cli("search", "--batch", str(batch), "--root", str(repo), "--json")
    first, second = (json.loads(line) for line in proc.stdout.splitlines())  # strict JSON
    assert first == {"id": None, "error": f"{batch}:1: not JSON (NaN is not JSON)"}
    assert second["id"] == 2 and second["error"].startswith(f"{batch}:2: ")
    assert proc.returncode == 1

    batch.write_bytes(b'\xff\xfe{"id": 1}\n')
    proc = cli("search", "--batch", str(batch), "--root", str(repo), "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["error"] == (
        f"batch file {batch} is not UTF-8 text (byte 0): write it as UTF-8 JSON lines")

    proc = cli("search", "redirects", "--batch", str(batch), "--root", str(repo))
    assert proc.returncode == 1 and "not both" in proc.stderr


def test_a_batch_with_filters_that_cannot_match_says_so_once(cli, repo, tmp_path):
    batch = tmp_path / "queries.jsonl"
    batch.write_text('{"id": 1, "query": "redirects"}\n{"id": 2, "query": "hash a password"}\n')
    proc = cli("search", "--batch", str(batch), "--root", str(repo), "--language", "cobol")
    assert proc.returncode != 0 and proc.stdout == ""  # refused before the first line
    assert proc.stderr.count("unknown language 'cobol'") == 1

    proc = cli("search", "--batch", str(batch), "--root", str(repo), "--path", "nowhere/**")
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["results"] for line in proc.stdout.splitlines()] == [[], []]
    assert proc.stderr.count("no indexed file in") == 1  # not left to look like the threshold


def test_text_the_locale_cannot_read_is_searched_not_a_traceback(cli, repo, tmp_path):
    # A byte that is not UTF-8 in argv reaches Python as a lone surrogate, as does JSON's
    # "\ud800" in a batch line: the tokenizer refused both with a TypeError.
    proc = cli("search", "hash a password \udcff", "--root", str(repo), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["path"] == "src/auth/passwords.py"
    batch = tmp_path / "odd.jsonl"
    batch.write_text('{"id": 1, "query": "hash a password \\ud800"}\n')
    proc = cli("search", "--batch", str(batch), "--root", str(repo), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["path"] == "src/auth/passwords.py"


def test_a_batch_from_stdin(repo):
    proc = rag_process("search", "--batch", "-", "--root", str(repo), "--json",
                       stdin='{"id": "s", "query": "hash a password"}\n')
    assert proc.returncode == 0, proc.stderr
    [line] = [json.loads(text) for text in proc.stdout.splitlines()]
    assert line["id"] == "s" and line["results"][0]["path"] == "src/auth/passwords.py"


def test_status_json(cli, repo):
    cli("index", str(repo))  # whatever ran before (or did not)
    proc = cli("status", str(repo), "--json")
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status["files"] == 5 and status["indexed"] is True
    assert status["dimension"] == 384 and status["last_indexed_at"]


def test_a_damaged_manifest_is_shown_by_status_and_leaves_the_knowledge_base_readable(
        cli, tmp_path):
    root = make_sample_root(tmp_path)
    assert cli("index", str(root)).returncode == 0
    assert cli("kb", "add", "--mode", "debugger", "--root", str(root), "a note").returncode == 0
    (root / ".rag-lsp" / "manifest.json").write_text("{broken")
    status = cli("status", str(root), "--json")
    assert status.returncode == 1
    assert json.loads(status.stdout)["index_problem"].startswith("index manifest ")
    plain = cli("status", str(root))
    assert "problem     index manifest" in plain.stdout and "not indexed yet" not in plain.stdout
    listed = cli("kb", "list", "--mode", "debugger", "--root", str(root))
    assert listed.returncode == 0 and "a note" in listed.stdout
    rebuilt = cli("index", str(root))
    assert rebuilt.returncode == 0 and "rebuilt the index" in rebuilt.stderr
    assert "index --full" not in rebuilt.stderr  # the rebuild is done: no advice to do it
    assert cli("status", str(root)).returncode == 0


def test_invalid_settings_name_the_setting_and_rule(cli, tmp_path):
    (tmp_path / ".rag-lsp.json").write_text('{"chunkTokens": 1000, "searchMode": "fuzzy"}')
    proc = cli("index", str(tmp_path))
    assert proc.returncode == 1
    assert "`chunkTokens` = 1000" in proc.stderr and "at most 254" in proc.stderr
    assert "`searchMode`" in proc.stderr and "'hybrid'" in proc.stderr


def test_bad_flag_value_names_the_flag(cli, repo):
    proc = cli("search", "x", "--root", str(repo), "-k", "0", "--json")
    assert proc.returncode == 1
    assert "`topK` = 0 in -k" in json.loads(proc.stdout)["error"]


def test_missing_model_dir_says_how_to_get_the_model(cli, repo, tmp_path):
    proc = cli("index", str(repo), "--model-dir", str(tmp_path / "none"))
    assert proc.returncode == 1
    assert "rag-lsp model install" in proc.stderr


def test_search_without_model_answers_lexically_and_warns(cli, repo, tmp_path):
    cli("index", str(repo))
    proc = cli("search", "redirects", "--root", str(repo), "--model-dir", str(tmp_path / "none"),
               "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["mode"] == "lexical" and payload["results"][0]["path"] == "src/http/client.py"
    assert "warning:" in proc.stderr and "rag-lsp model install" in proc.stderr


def test_unknown_kind_is_rejected_with_the_choices(repo):
    proc = rag_process("search", "x", "--root", str(repo), "--kind", "func")
    assert proc.returncode == 2 and "invalid choice: 'func'" in proc.stderr


def test_a_path_filter_that_cannot_be_read_is_named(cli, repo):
    proc = cli("search", "redirects", "--root", str(repo), "--path", "src/[z-a]*", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"].startswith(
        "the path filter `src/[z-a]*` is not a valid gitignore-style glob")
    assert "Traceback" not in proc.stderr


def test_messages_print_the_users_text_as_typed(cli, repo):
    # Square brackets and colons are a Next.js route and an emoji code to rich's markup.
    proc = cli("context", "--root", str(repo), "--mode", "debugger",
               "--file", str(repo / "app/[id]/page:smile:.tsx"))
    assert proc.returncode == 1
    assert "app/[id]/page:smile:.tsx" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("kb", "delete", "--root", str(repo), "--mode", "debugger", "[/]")
    assert proc.returncode == 1 and "[/]" in proc.stderr and "Traceback" not in proc.stderr


def test_an_index_folder_that_cannot_be_created_is_named_with_the_fix(cli, repo, tmp_path):
    # As a read-only checkout does for a user (a test run as root cannot be refused by mode).
    (tmp_path / "a-file").write_text("")
    unwritable = str(tmp_path / "a-file" / "index")
    for command in (["index", str(repo)], ["kb", "add", "--mode", "debugger", "--root",
                                           str(repo), "a note"]):
        proc = cli(*command, "--index-path", unwritable)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert f"cannot create the index folder {unwritable}: Not a directory" in proc.stderr
        assert "--index-path" in proc.stderr and "damaged" not in proc.stderr


def test_an_index_folder_linked_out_of_the_workspace_is_not_written(cli, tmp_path):
    """A repository can hold a `.rag-lsp` link to any folder; the index (every file's text)
    was written there, the folder made 0700."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "a.py").write_text("def alpha():\n    return 1\n")
    (root / ".rag-lsp").symlink_to(outside, target_is_directory=True)
    for command in (["index", str(root)], ["kb", "add", "--mode", "debugger", "--root",
                                           str(root), "a note"]):
        proc = cli(*command)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert f"is a link to {outside}, outside the workspace" in proc.stderr
    assert list(outside.iterdir()) == []
    proc = cli("index", str(root), "--index-path", str(outside))  # on purpose: allowed
    assert proc.returncode == 0, proc.stderr
    (root / ".rag-lsp").unlink()
    (root / ".rag-lsp").symlink_to("gone", target_is_directory=True)
    proc = cli("index", str(root))
    assert proc.returncode == 1
    assert "is a link to gone, which does not exist" in proc.stderr
    (root / ".rag-lsp").unlink()
    (root / ".rag-lsp").symlink_to(".rag-lsp")  # a loop of one
    proc = cli("index", str(root))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "is a loop of links" in proc.stderr


def test_an_index_folder_holding_links_is_not_written_through(cli, tmp_path):
    """A repository can commit a `.rag-lsp/` with `writer.lock` linked to a file of the
    user's: the lock's record overwrote that file on the first index."""
    root, victim = tmp_path / "ws", tmp_path / "bashrc"
    (root / ".rag-lsp").mkdir(parents=True)
    (root / "a.py").write_text("def alpha():\n    return 1\n")
    victim.write_text("precious\n")
    (root / ".rag-lsp" / "writer.lock").symlink_to(victim)
    proc = cli("index", str(root))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "holds a link" in proc.stderr and "writer.lock" in proc.stderr
    assert victim.read_text() == "precious\n"


def test_a_name_with_a_newline_is_one_line_and_can_be_given(cli, tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    odd = root / "odd\nname.py"
    odd.write_text("def reticulate_splines():\n    return 'splines'\n")
    proc = cli("search", "reticulate splines", "--root", str(root), "--mode", "lexical")
    assert proc.returncode == 0, proc.stderr
    [hit] = [line for line in proc.stdout.splitlines() if "name.py" in line]
    assert "odd\\nname.py:1-2" in hit  # escaped: one result, one line
    proc = cli("context", "--mode", "debugger", "--root", str(root), "--no-knowledge",
               "--manual", f"{odd}:1-2", "splines")
    assert proc.returncode == 0, proc.stderr
    assert "reticulate_splines" in proc.stdout


def test_a_loop_of_links_as_a_path_is_named_not_a_traceback(cli, repo, tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    loop = str(tmp_path / "a")
    for command, says in ((["index", loop], "workspace root"),
                          (["search", "x", "--root", loop], "workspace root"),
                          (["index", str(repo), "--index-path", loop], "--index-path"),
                          (["context", "--mode", "debugger", "--root", str(repo), "--manual",
                            loop, "x"], "--manual"),
                          (["context", "--mode", "debugger", "--root", str(repo), "--file",
                            loop], "--file")):
        proc = cli(*command)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        assert f"{says}: {loop} is a loop of symbolic links" in proc.stderr, proc.stderr


def test_missing_root_is_a_clear_error(tmp_path):
    proc = rag_process("index", str(tmp_path / "absent"))
    assert proc.returncode == 1 and "not a directory" in proc.stderr


@pytest.mark.parametrize("command", [[], ["index"], ["search"], ["status"], ["model"],
                                     ["model", "install"], ["model", "status"]])
def test_every_command_has_help(command):
    proc = rag_process(*command, "--help")
    assert proc.returncode == 0 and "usage: rag-lsp" in proc.stdout


def test_model_status_and_idempotent_install(cli):
    status = cli("model", "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["ok"] is True
    install = cli("model", "install", "--json")
    assert install.returncode == 0, install.stderr
    assert json.loads(install.stdout)["installed"] is False
    assert "already installed" in install.stderr


def test_search_on_an_index_of_an_older_format_rebuilds_it_first(cli, sample_root):
    root = sample_root
    assert cli("index", str(root)).returncode == 0
    manifest = root / ".rag-lsp" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "schema_version": 1}))
    proc = cli("search", "where are redirects followed?", "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    assert "has format 1, from an older rag-lsp; rebuilding it first" in proc.stderr
    assert json.loads(proc.stdout)["results"][0]["path"] == "src/http/client.py"
