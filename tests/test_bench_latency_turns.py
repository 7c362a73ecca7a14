"""bench/server_latency.py --baseline (bench/latency_turns.py): the checkouts take turns,
the order swapped each round, each turn a whole run in a process importing its checkout, on
a fresh copy of the workdir that is removed after; the figures side by side. One test runs
the real bench (server, model, LanceDB) on a tiny workspace."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import latency_turns  # noqa: E402
from latency_turns import (  # noqa: E402
    PHASES,
    baseline_problem,
    child_args,
    print_turns,
    run_turns,
    summarize,
    turn_order,
)
from server_latency import server_package  # noqa: E402

# Stands in for server_latency.py in a turn: checks it was given a copy of the workdir with
# its index, writes into the copy, and prints the figures of a run, slower for a checkout
# named "before"; told by the environment to fail in one checkout's turn, to hang, or to name
# another checkout's code as its own or its server's.
FAKE_RUN = r'''
import importlib.util, json, os, sys
from pathlib import Path
args = sys.argv[1:]
work = Path(args[args.index("--workdir") + 1])
assert "--reuse" in args and "--json" in args, args
assert (work / "ws" / "a.py").is_file() and list(work.glob("index/*/manifest.json")), work
assert not (work / "ws" / "written_by_a_turn.txt").exists(), "a copy used twice"
(work / "ws" / "written_by_a_turn.txt").write_text("x")
if os.environ.get("FAKE_HANG"):  # a turn that hangs, with a process of its own (a server)
    import subprocess, time
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(os.environ["FAKE_HANG"]).write_text(str(server.pid))
    time.sleep(120)
code = Path(importlib.util.find_spec("rag_lsp").origin).parent
slow = 2.0 if code.parent.name == "before" else 1.0
if os.environ.get("FAKE_FAIL") == ("before" if slow == 2.0 else "this"):
    sys.exit(3)
server_code = os.environ.get("FAKE_SERVER_CODE", str(code))
code = os.environ.get("FAKE_CODE", str(code))
def phase(ms, **extra):
    return {"lsp": {"n": 10, "p50_ms": ms * slow, "p95_ms": 2 * ms * slow,
                    "p99_ms": 3 * ms * slow},
            "server_took": {"n": 10, "p95_ms": 1.5 * ms * slow},
            "server_peak_rss_mb": 300 + ms, **extra}
fresh = {"n": 1, "p50_ms": 40.0, "p95_ms": 50.0}
result = {"files": 1, "chunks": 2, "cpu_count": 2, "code": code, "server_code": server_code,
          "search_alone": phase(5), "search_alone_spaced": phase(6), "search_idle": phase(6),
          "search_reindex": phase(7, run_seconds=3.0),
          "search_reindex_alone": phase(8, run_seconds=2.0),
          "search_after_spaced": phase(6), "fresh_client": fresh, "fresh_watcher": fresh}
print("some log line")
print(json.dumps(result))
'''


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "ws").mkdir(parents=True)
    (work / "ws" / "a.py").write_text("def a():\n    return 1\n")
    (work / "index" / "ws-0123456789").mkdir(parents=True)
    (work / "index" / "ws-0123456789" / "manifest.json").write_text("{}")
    return work


@pytest.fixture
def before(tmp_path: Path) -> Path:
    """A checkout to compare with: a rag_lsp package and a model file, nothing more."""
    code = tmp_path / "before"
    (code / "rag_lsp").mkdir(parents=True)
    (code / "rag_lsp" / "__init__.py").write_text("")
    (code / "models" / "m").mkdir(parents=True)
    (code / "models" / "m" / "model.onnx").write_bytes(b"")
    return code


@pytest.fixture
def fake_run(tmp_path: Path, monkeypatch) -> Path:
    script = tmp_path / "fake_server_latency.py"
    script.write_text(FAKE_RUN)
    monkeypatch.setattr(latency_turns, "SCRIPT", script)
    return script


def namespace(workdir: Path, baseline: Path, rounds: int = 2, **extra) -> argparse.Namespace:
    given = {"edits": 1, "queries": 3, "rewrite": 0.3, "seed": 7, "model_sleep": None,
             "json": False, "out": workdir.parent / "turns.json", **extra}
    return argparse.Namespace(workdir=workdir, baseline=baseline, rounds=rounds, **given)


def test_the_order_is_swapped_each_round():
    names = ["baseline", "this tree"]
    assert turn_order(names, 1) == ["baseline", "this tree"]
    assert turn_order(names, 2) == ["baseline", "this tree", "this tree", "baseline"]
    assert turn_order(names, 3)[4:] == ["baseline", "this tree"]
    assert turn_order(["this tree"], 2) == ["this tree", "this tree"]


def test_a_baseline_must_be_a_checkout_with_a_model(tmp_path, before):
    assert "not a checkout" in baseline_problem(tmp_path / "nothing")
    (before / "models" / "m" / "model.onnx").unlink()
    said = baseline_problem(before)
    assert "no model" in said
    assert f"ln -s {REPO / 'models' / 'all-MiniLM-L6-v2'} {before / 'models'}/" in said
    assert baseline_problem(REPO) is None  # (make test installs the model first)


def test_each_turn_is_given_the_workload_on_its_copy(workdir, before, tmp_path):
    args = child_args(namespace(workdir, before), tmp_path / "copy")
    assert args[0] == str(latency_turns.SCRIPT)
    assert args[args.index("--workdir") + 1] == str(tmp_path / "copy")
    assert args[args.index("--queries") + 1] == "3" and "--reuse" in args
    assert "--model-sleep" not in args
    paced = child_args(namespace(workdir, before, model_sleep=0.07), tmp_path / "copy")
    assert paced[paced.index("--model-sleep") + 1] == "0.07"


def test_turns_run_each_checkout_on_a_fresh_copy_in_turns(workdir, before, fake_run,
                                                          capsys):
    result = run_turns(namespace(workdir, before))
    assert result["order"] == ["baseline", "this tree", "this tree", "baseline"]
    assert [t["checkout"] for t in result["turns"]] == result["order"]
    assert {t["code"] for t in result["turns"]} == {str(before / "rag_lsp"),
                                                    str(REPO / "rag_lsp")}
    # every copy is gone, and what the turns wrote never reached the workdir
    assert not list(workdir.parent.glob("work-turn*"))
    assert not (workdir / "ws" / "written_by_a_turn.txt").exists()
    idle = result["summary"]["phases"]["search_alone"]
    assert idle["baseline"]["p95_ms"] == [20.0, 20.0] and idle["this tree"]["median_p95_ms"] == 10
    assert idle["p95_this_over_baseline"] == 0.5
    assert result["summary"]["server_peak_rss_mb"]["this tree"]["search_reindex_alone"] == 308
    print_turns(result)
    table = capsys.readouterr().out
    for _key, label in PHASES:
        assert label in table
    assert re.search(r"^  idle, back to back +10\.0 / 20\.0 +5\.0 / 10\.0 +5\.0 / 10\.0 "
                     r"+10\.0 / 20\.0 +20\.0 +10\.0 +0\.500$", table, re.MULTILINE), table
    assert idle["this tree"]["p99_ms"] == [15.0, 15.0]
    assert re.search(r"^rag/search round trip p99, ms( +\d \w+( tree)?){4}\n"
                     r"  idle, back to back +30\.0 +15\.0 +15\.0 +30\.0$", table,
                     re.MULTILINE), table
    assert re.search(r"^  an edit searchable, client's file events( +40\.0 / 50\.0){4}$", table,
                     re.MULTILINE), table


@pytest.mark.parametrize(("variable", "who"), [("FAKE_CODE", "bench"),
                                               ("FAKE_SERVER_CODE", "server")])
def test_a_turn_that_ran_other_code_stops_the_bench(workdir, before, fake_run, monkeypatch,
                                                    variable, who):
    monkeypatch.setenv(variable, str(REPO / "rag_lsp"))  # the baseline's turn says so
    with pytest.raises(SystemExit,
                       match=re.escape(f"baseline's turn: its {who} ran the code in {REPO}")):
        run_turns(namespace(workdir, before))
    assert not list(workdir.parent.glob("work-turn*"))


def test_a_failed_turn_stops_the_bench_keeping_the_turns_before(workdir, before, fake_run,
                                                                monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "this")  # the second turn, this tree's
    saved: list[dict] = []
    with pytest.raises(SystemExit, match="failed with exit code 3"):
        run_turns(namespace(workdir, before, rounds=1),
                  save=lambda so_far: saved.append(json.loads(json.dumps(so_far))))
    assert [t["checkout"] for t in saved[-1]["turns"]] == ["baseline"]
    assert saved[-1]["summary"]["phases"]["search_alone"]["baseline"]["median_p95_ms"] == 20
    assert not list(workdir.parent.glob("work-turn*"))
    assert (workdir / "ws" / "a.py").is_file()


def test_a_phase_without_searches_shows_a_dash(capsys):
    """A re-index can end before its first search: its figures are only ``{"n": 0}``."""
    def phase(**lsp) -> dict:
        return {"lsp": {"n": 1, **lsp}, "server_took": lsp, "server_peak_rss_mb": 300,
                "run_seconds": 1.0}
    turns = [{"checkout": name, "files": 1, "chunks": 2, "seconds": 9.0,
              **{key: phase(p50_ms=1.0, p95_ms=2.0) for key, _label in PHASES},
              "search_reindex_alone": {"lsp": {"n": 0}, "server_took": {"n": 0},
                                       "server_peak_rss_mb": 300, "run_seconds": 0.1},
              "fresh_client": {"n": 0}, "fresh_watcher": {"n": 0}}
             for name in ("baseline", "this tree")]
    summary = summarize(turns, ["baseline", "this tree"])
    assert summary["phases"]["search_reindex_alone"]["this tree"]["median_p95_ms"] is None
    assert "p95_this_over_baseline" not in summary["phases"]["search_reindex_alone"]
    assert summary["phases"]["search_alone"]["p95_this_over_baseline"] == 1.0
    print_turns({"checkouts": {"baseline": "b", "this tree": "t"}, "order": ["baseline",
                 "this tree"], "turns": turns, "summary": summary})
    assert re.search(r"^  second re-index, server alone( +- / -){2} +- +- +-$",
                     capsys.readouterr().out, re.MULTILINE)


def test_a_turn_past_its_time_is_stopped_with_what_it_started(workdir, before, fake_run,
                                                               monkeypatch, tmp_path):
    pid_file = tmp_path / "server.pid"
    monkeypatch.setenv("FAKE_HANG", str(pid_file))
    monkeypatch.setattr(latency_turns, "TURN_TIMEOUT", 3.0)
    with pytest.raises(SystemExit, match="baseline's turn ran past 3 s: stopped"):
        run_turns(namespace(workdir, before, rounds=1))
    server = int(pid_file.read_text())
    for _ in range(100):  # killed, then reaped by init
        try:
            state = Path(f"/proc/{server}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the turn's own process {server} still runs")
    assert not list(workdir.parent.glob("work-turn*"))


def test_the_ratio_comes_from_the_unrounded_medians():
    def turn(name: str, p95: float) -> dict:
        return {"checkout": name, **{key: {"lsp": {"p50_ms": 1.0, "p95_ms": p95},
                                           "server_took": {"p95_ms": 1.0},
                                           "server_peak_rss_mb": 300} for key, _ in PHASES}}
    summary = summarize([turn("baseline", 30.16), turn("this tree", 10.04)],
                        ["baseline", "this tree"])
    idle = summary["phases"]["search_alone"]
    assert idle["this tree"]["median_p95_ms"] == 10.0 and idle["baseline"]["median_p95_ms"] == 30.2
    assert idle["p95_this_over_baseline"] == 0.333  # (10.0 / 30.2 would be 0.331)


def test_the_server_package_is_read_from_its_process(tmp_path, before):
    """Where a server started as ``python -m rag_lsp`` imports the package from: its
    working folder first, then PYTHONPATH; nowhere there, the installed one."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def package_of(cwd: Path, pythonpath: str | None) -> str | None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        # (read once it runs: the kernel shows a process's environment only a moment after
        # its exec, and a server is read once it has answered)
        with subprocess.Popen([sys.executable, "-c", "print('up', flush=True); "
                               "import time; time.sleep(60)"], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, text=True) as proc:
            try:
                assert proc.stdout.readline() == "up\n"
                return server_package(proc.pid)
            finally:
                proc.kill()

    assert package_of(elsewhere, f"{elsewhere}{os.pathsep}{before}") == str(before / "rag_lsp")
    assert package_of(before, str(REPO)) == str(before / "rag_lsp")
    assert package_of(elsewhere, None) is None


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "bench" / "server_latency.py"), *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "LANCE_LOG": "error"})


@pytest.mark.parametrize(("args", "said"), [
    (["--baseline", "."], "give --workdir"),
    (["--baseline", ".", "--workdir", "w", "--stand-in-vectors"], "without --stand-in-vectors"),
    (["--baseline", ".", "--workdir", "w", "--rounds", "0"], "--rounds must be 1 or more"),
    (["--baseline", ".", "--workdir", "w", "--model-sleep", "-1"], "--model-sleep must be"),
])
def test_the_command_refuses_what_it_cannot_compare(args, said):
    done = bench(*args)
    assert done.returncode == 2 and said in done.stderr


def test_the_command_says_how_to_build_the_workdir_first(tmp_path):
    done = bench("--baseline", str(REPO), "--workdir", str(tmp_path / "none"))
    assert done.returncode == 1
    assert f"{tmp_path / 'none'} has no ws/ and index/ to copy" in done.stderr
    assert f"--workdir {tmp_path / 'none'} (without --baseline" in done.stderr


def test_the_real_bench_in_turns_on_a_tiny_workspace(tmp_path):
    """The real server, model and LanceDB: a workdir of a few files built by a plain run,
    then one round, this tree as its own baseline."""
    work = tmp_path / "tiny"
    built = bench("--workdir", str(work), "--files", "6", "--edits", "1", "--queries", "2",
                  "--out", str(tmp_path / "plain.json"))
    assert built.returncode == 0, built.stderr[-3000:]
    out = tmp_path / "turns.json"
    done = bench("--workdir", str(work), "--edits", "1", "--queries", "2", "--baseline",
                 str(REPO), "--rounds", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["order"] == ["baseline", "this tree"]
    for turn in result["turns"]:
        assert turn["code"] == turn["server_code"] == str(REPO / "rag_lsp")
        assert turn["search_alone"]["lsp"]["n"] == 2
    assert "second re-index, server alone" in done.stdout
    assert not list(tmp_path.glob("tiny-turn*"))
