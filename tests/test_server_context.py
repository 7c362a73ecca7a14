"""Mode context and knowledge bases through the server (real model, real LanceDB), run in this
process (``inprocess_lsp``) with VS Code's capabilities: what a request answers does not
depend on the pipe it came through (``test_server_e2e`` proves the process).

Tests that only read share one server; a test that writes (knowledge, files) has a server
and a copy of the workspace of its own, so no test depends on another or on their order."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from rag_lsp.config import Settings
from rag_lsp.server.methods import (
    RAG_INJECT_CONTEXT,
    RAG_KB_ADD,
    RAG_KB_CLEAR,
    RAG_KB_DELETE,
    RAG_KB_LIST,
    RAG_KB_SEARCH,
)
from rag_lsp.workspace import Workspace
from tests.conftest import SAMPLE_FILES, write_files
from tests.inprocess_lsp import InProcessServer, capabilities_of

MODES = ("debugger", "security", "performance", "planning")
MODE_FILES = {
    "src/jobs/runner.py": '''
        """Runs queued jobs with retries."""
        import logging
        import time

        log = logging.getLogger(__name__)


        class JobFailed(Exception):
            """A job failed after every retry."""


        def run_with_retries(job, attempts=3):
            """Run a job, retrying on connection errors with a growing delay."""
            for attempt in range(attempts):
                try:
                    return job()
                except ConnectionError as exc:
                    log.error("job %s failed (attempt %d): %s", job, attempt, exc)
                    time.sleep(2 ** attempt)
            raise JobFailed(job)
        ''',
    "src/reports/totals.py": '''
        def monthly_totals(orders):
            """Sum order amounts per month; loops over every order once."""
            totals = {}
            for order in orders:
                key = order.created.strftime("%Y-%m")
                totals[key] = totals.get(key, 0) + order.amount
            return totals
        ''',
    "bench/totals_speed.py": '''
        """How long monthly_totals takes over a year of orders."""
        import time

        from src.reports.totals import monthly_totals


        def time_monthly_totals(orders, repeat=5):
            """The best of ``repeat`` timed runs of monthly_totals over ``orders``, seconds."""
            best = float("inf")
            for _ in range(repeat):
                started = time.perf_counter()
                monthly_totals(orders)
                best = min(best, time.perf_counter() - started)
            return best
        ''',
    "docs/design.md": """
        # Design
        ## Job queue
        Jobs are queued in the database and run by workers with retries; a failed job is
        kept for inspection. We plan to move retries into the queue itself.
        """,
}


OPTIONS = {"extraModes": ["review"]}


def _context_files(root):
    write_files(root, {**SAMPLE_FILES, **MODE_FILES})
    return root


async def _serving(root, embedder):
    """The server on ``root`` (VS Code's capabilities, ``OPTIONS``), once it is ready."""
    async with InProcessServer(embedder=embedder, answer_requests=True) as lsp:
        await lsp.start(root, capabilities_of("visual-studio-code"), OPTIONS)
        await lsp.wait_for_state("ready")
        yield lsp
        assert lsp.shown_errors() == []


@pytest.fixture(scope="module")
def context_repo(tmp_path_factory):
    return _context_files(tmp_path_factory.mktemp("context") / "repo")


@pytest.fixture(scope="module")
async def ctx(context_repo, embedder):
    """The server the reading tests share: nothing they send changes what it holds."""
    async for lsp in _serving(context_repo, embedder):
        yield lsp


@pytest.fixture(scope="module")
def indexed_template(tmp_path_factory, embedder):
    root = _context_files(tmp_path_factory.mktemp("context-template") / "repo")
    Workspace.open(root, Settings.from_dict({}), embedder=embedder).index()
    return root


@pytest.fixture
def own_repo(tmp_path, indexed_template):
    """A copy of the workspace, its index included: the server finds it current at once."""
    return shutil.copytree(indexed_template, tmp_path / "repo", symlinks=True)


@pytest.fixture
async def own(own_repo, embedder):
    """A server of the test's own, on its own copy of the workspace: for tests that write."""
    async for lsp in _serving(own_repo, embedder):
        yield lsp


async def request(lsp: InProcessServer, method: str, params: dict) -> dict:
    return await lsp.result(method, params)  # checked against the result schema


def uri(root, rel: str) -> str:
    return (root / rel).as_uri()


def lsp_lines(start: int, end: int) -> dict:
    """1-based inclusive lines as an LSP range."""
    return {"start": {"line": start - 1, "character": 0}, "end": {"line": end, "character": 0}}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("budget", [50, 300, 1200, 8000])
async def test_each_mode_packs_attributed_context_within_budget(ctx, context_repo, mode, budget):
    result = await request(ctx, RAG_INJECT_CONTEXT, {
        "mode": mode, "query": "retry failed jobs after connection errors",
        "tokenBudget": budget})
    assert result["totalTokens"] <= budget * 0.9 and result["budget"] == budget
    assert sum(i["tokens"] for i in result["items"]) == result["totalTokens"]
    headings = re.findall(r"^### (\w+): ", result["context"], re.M)
    assert headings == [i["source"] for i in result["items"]]
    for item in result["items"]:
        if item["source"] == "codebase":
            start, end = item["range"]["start"]["line"] + 1, item["range"]["end"]["line"]
            lines = (context_repo / item["path"]).read_text().splitlines()[start - 1:end]
            # Whole chunks only, attributed with language and path:Lstart-Lend.
            assert f"{item['path']}:L{start}-L{end}" in result["context"]
            assert "\n".join(lines) in result["context"]
    if budget >= 300:
        assert result["items"], "a budget of 300 tokens holds at least one chunk"
    if budget >= 1200:
        assert "src/jobs/runner.py" in [i["path"] for i in result["items"]]
    if budget == 50:
        assert result["items"] == [] and result["context"] == ""
        assert result["dropped"] and all(d["reason"] == "budget" for d in result["dropped"])


async def test_modes_shape_the_ranking(ctx):
    query = "what happens when a job fails and is retried"
    first = {}
    for mode in ("debugger", "planning"):
        result = await request(ctx, RAG_INJECT_CONTEXT, {
            "mode": mode, "query": query, "tokenBudget": 4000})
        first[mode] = result["items"][0]["path"]
    assert first["planning"] == "docs/design.md"
    assert first["debugger"] == "src/jobs/runner.py"


async def test_performance_mode_lifts_the_benchmark_prior(ctx):
    """A benchmark harness ranks well below the code it measures in the other modes (and in
    search); performance mode lifts that prior: a harness shows what is slow and how it is
    timed. The boosts the mode adds are small (+0.06), the prior's factor is 0.3."""
    query = "how long does computing the monthly totals of orders take"
    scores = {}
    for mode in ("debugger", "performance"):
        result = await request(ctx, RAG_INJECT_CONTEXT, {
            "mode": mode, "query": query, "tokenBudget": 4000})
        items = [i for i in result["items"] if i["source"] == "codebase"]
        assert items[0]["path"] == "src/reports/totals.py"
        harness = [i["score"] for i in items if i["path"] == "bench/totals_speed.py"]
        assert harness, f"{mode}: the harness is not in the context"
        scores[mode] = max(harness)
    assert scores["performance"] > 2 * scores["debugger"]


async def test_manual_context_comes_first(ctx, context_repo):
    result = await request(ctx, RAG_INJECT_CONTEXT, {
        "mode": "security", "query": "password hashing", "tokenBudget": 2000,
        "manualContext": [{"uri": uri(context_repo, "src/cache/lru.py"),
                           "range": lsp_lines(1, 5)},
                          uri(context_repo, "web/static/app.js")]})
    sources = [(i["source"], i["path"]) for i in result["items"]]
    assert sources[:2] == [("manual", "src/cache/lru.py"), ("manual", "web/static/app.js")]
    assert ("codebase", "src/auth/passwords.py") in sources
    assert result["context"].startswith("### manual: src/cache/lru.py:L1-L5")


async def test_nothing_relevant_gives_an_empty_context(ctx):
    result = await request(ctx, RAG_INJECT_CONTEXT, {
        "mode": "debugger", "query": "lattice gauge theory of quantum chromodynamics",
        "tokenBudget": 4000})
    assert result["context"] == "" and result["items"] == []


async def test_query_is_derived_from_the_active_selection(ctx, context_repo):
    result = await request(ctx, RAG_INJECT_CONTEXT, {
        "mode": "debugger", "tokenBudget": 3000,
        "activeFile": {"uri": uri(context_repo, "src/jobs/runner.py"),
                       "selection": lsp_lines(13, 20)}})
    assert "run_with_retries" in result["query"]
    assert result["items"][0]["path"] == "src/jobs/runner.py"


async def test_knowledge_add_search_list_by_time_and_clear(own):
    first = await request(own, RAG_KB_ADD, {
        "mode": "debugger", "title": "Retry storms",
        "content": "Jobs retried on ConnectionError can pile up; the delay doubles each time.",
        "tags": ["jobs"], "sessionId": "s1"})
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", first["createdAt"])
    second = await request(own, RAG_KB_ADD, {
        "mode": "debugger", "content": "The LRU cache evicts the oldest entry when full."})
    await request(own, RAG_KB_ADD, {"mode": "planning", "content": "Move retries into the queue."})

    found = await request(own, RAG_KB_SEARCH, {"mode": "debugger",
                                               "query": "why do retries pile up?"})
    assert found["entries"][0]["id"] == first["id"]
    assert all(e["mode"] == "debugger" for e in found["entries"])

    listed = await request(own, RAG_KB_LIST, {"mode": "debugger"})
    assert [e["id"] for e in listed["entries"]][:2] == [second["id"], first["id"]]
    window = await request(own, RAG_KB_LIST, {"mode": "debugger",
                                              "since": second["createdAt"]})
    assert [e["id"] for e in window["entries"]] == [second["id"]]
    before = await request(own, RAG_KB_LIST, {"mode": "debugger",
                                              "until": first["createdAt"]})
    assert first["id"] in [e["id"] for e in before["entries"]]
    assert second["id"] not in [e["id"] for e in before["entries"]]

    # Knowledge is injected with the mode's context, ahead of code.
    context = await request(own, RAG_INJECT_CONTEXT, {
        "mode": "debugger", "query": "retries pile up on connection errors",
        "tokenBudget": 3000})
    assert context["items"][0]["source"] == "knowledge"
    assert context["items"][0]["id"] == first["id"]

    assert (await request(own, RAG_KB_DELETE, {"mode": "debugger", "id": second["id"]}))[
        "removed"] == 1
    assert (await request(own, RAG_KB_CLEAR, {"mode": "debugger"}))["removed"] == 1
    assert (await request(own, RAG_KB_LIST, {"mode": "debugger"}))["entries"] == []
    assert (await request(own, RAG_KB_LIST, {"mode": "planning"}))["total"] == 1
    assert (await request(own, RAG_KB_CLEAR, {"mode": "planning"}))["removed"] == 1


async def test_editing_anchored_code_marks_the_entry_stale(own, own_repo):
    path = own_repo / "src/reports/totals.py"
    added = await request(own, RAG_KB_ADD, {
        "mode": "performance", "content": "monthly_totals is linear in the orders.",
        "anchors": [{"uri": path.as_uri(), "range": lsp_lines(1, 7)}]})
    listed = await request(own, RAG_KB_LIST, {"mode": "performance"})
    entry = next(e for e in listed["entries"] if e["id"] == added["id"])
    assert entry["stale"] is False and entry["anchors"][0]["path"] == "src/reports/totals.py"

    path.write_text(path.read_text().replace("totals.get(key, 0)", "totals.setdefault(key, 0)"))
    own.notify("workspace/didChangeWatchedFiles",
               {"changes": [{"uri": path.as_uri(), "type": 2}]})  # Changed
    listed = await request(own, RAG_KB_LIST, {"mode": "performance"})
    entry = next(e for e in listed["entries"] if e["id"] == added["id"])
    assert entry["stale"] is True and "totals.py" in entry["staleReason"]


async def test_extra_modes_from_settings_have_their_own_knowledge(own):
    await request(own, RAG_KB_ADD, {"mode": "review", "content": "Prefer small functions."})
    assert (await request(own, RAG_KB_LIST, {"mode": "review"}))["total"] == 1


@pytest.mark.parametrize(("method", "params", "fragment"), [
    (RAG_KB_ADD, {"mode": "cooking", "content": "x"},
     "$.mode = 'cooking': unknown mode 'cooking'; valid modes: debugger, security, performance, "
     "planning, review"),
    (RAG_INJECT_CONTEXT, {"mode": "fishing", "query": "x", "tokenBudget": 10}, "unknown mode"),
    (RAG_INJECT_CONTEXT, {"mode": "debugger", "tokenBudget": 100}, "$.query: required"),
    (RAG_INJECT_CONTEXT, {"mode": "debugger", "query": "x", "tokenBudget": 0},
     "$.tokenBudget = 0: must be at least 1"),
    (RAG_KB_LIST, {"mode": "debugger", "since": "last tuesday"}, "ISO 8601"),
    # A whole float passes the standard's integer check, then broke slicing (-32603).
    (RAG_KB_LIST, {"mode": "debugger", "limit": 5.0}, "$.limit = 5.0: must be an integer"),
    ("rag/search", {"query": "retry", "topK": 5.0}, "$.topK = 5.0: must be an integer"),
    ("rag/search", {"query": "retry", "threshold": float("nan")},
     "$.threshold = nan: must be a number"),
])
async def test_bad_params_get_32602(ctx, method, params, fragment):
    error = await ctx.error(method, params)
    assert error["code"] == -32602 and fragment in error["message"]


async def test_bad_ranges_get_32602(ctx, context_repo):
    lru = uri(context_repo, "src/cache/lru.py")
    manual = await ctx.error(RAG_INJECT_CONTEXT, {
        "mode": "debugger", "query": "x", "tokenBudget": 100,
        "manualContext": [{"uri": lru, "range": lsp_lines(400, 410)}]})
    assert manual["code"] == -32602
    assert "manualContext[0]" in manual["message"] and "lines" in manual["message"]
    anchor = await ctx.error(RAG_KB_ADD, {
        "mode": "debugger", "content": "x",
        "anchors": [{"uri": lru, "range": lsp_lines(400, 410)}]})
    assert anchor["code"] == -32602 and "lru.py" in anchor["message"]


async def test_a_lone_surrogate_in_the_text_is_read_as_a_replacement_character(ctx):
    # JSON's "\ud800" is valid JSON and no text: the tokenizer and the table refused it
    # (-32603 internal); a UTF-8 decoder would have made it U+FFFD, and so does the server.
    found = await request(ctx, "rag/search", {"query": "retry \ud800 failed jobs"})
    assert found["results"]
    added = await request(ctx, RAG_KB_ADD, {"mode": "debugger", "content": "odd \udfff note"})
    listed = await request(ctx, RAG_KB_LIST, {"mode": "debugger"})
    [entry] = [e for e in listed["entries"] if e["id"] == added["id"]]
    assert entry["content"] == "odd \ufffd note"
    await request(ctx, RAG_KB_DELETE, {"mode": "debugger", "id": added["id"]})


async def test_a_range_that_ends_before_it_starts_gets_32602(ctx, context_repo):
    lru = uri(context_repo, "src/cache/lru.py")
    backwards = {"start": {"line": 5, "character": 0}, "end": {"line": 2, "character": 0}}
    for method, params, where in [
        (RAG_INJECT_CONTEXT, {"mode": "debugger", "query": "x", "tokenBudget": 100,
                              "manualContext": [{"uri": lru, "range": backwards}]},
         "$.manualContext[0].range"),
        (RAG_INJECT_CONTEXT, {"mode": "debugger", "tokenBudget": 100,
                              "activeFile": {"uri": lru, "selection": backwards}},
         "$.activeFile.selection"),
        (RAG_KB_ADD, {"mode": "debugger", "content": "x",
                      "anchors": [{"uri": lru, "range": backwards}]}, "$.anchors[0].range"),
    ]:
        error = await ctx.error(method, params)
        assert error["code"] == -32602
        assert error["message"].startswith(f"{where}: the range ends (line 2) before it starts")


async def test_a_fifo_or_a_loop_of_links_gets_32602_and_the_server_keeps_answering(
        ctx, context_repo):
    odd = context_repo / "odd_files"
    odd.mkdir(exist_ok=True)
    try:
        os.mkfifo(odd / "pipe.py")  # opening it to read would wait for a writer forever
        (odd / "loop_a").symlink_to(odd / "loop_b")
        (odd / "loop_b").symlink_to(odd / "loop_a")
        for ref, says in [(uri(context_repo, "odd_files/pipe.py"), "not a regular file"),
                          (uri(context_repo, "odd_files/loop_a"), "a loop of symbolic links"),
                          (uri(context_repo, "odd_files") + "/a%00b.py", "a NUL character")]:
            for params in ({"mode": "debugger", "query": "x", "tokenBudget": 100,
                            "manualContext": [ref]},
                           {"mode": "debugger", "tokenBudget": 100, "activeFile": {"uri": ref}}):
                error = await ctx.error(RAG_INJECT_CONTEXT, params)
                assert error["code"] == -32602 and says in error["message"], error
        anchor = await ctx.error(RAG_KB_ADD, {
            "mode": "debugger", "content": "x",
            "anchors": [{"uri": uri(context_repo, "odd_files/loop_a"), "range": lsp_lines(1, 1)}]})
        assert anchor["code"] == -32602 and "a loop of symbolic links" in anchor["message"]
        result = await request(ctx, RAG_INJECT_CONTEXT, {  # with a query, a bad active file
            "mode": "debugger", "query": "retry failed jobs", "tokenBudget": 2000,  # is unread
            "activeFile": {"uri": uri(context_repo, "odd_files/loop_a")}})
        assert result["items"]
    finally:
        shutil.rmtree(odd)


@pytest.fixture(scope="module")
def outside_file(tmp_path_factory, context_repo):
    """A secret beside the workspace, and a symlink to it inside the workspace."""
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    secret.write_text("hunter2 is the root password\n")
    link = context_repo / "src" / "linked_secret.txt"
    if not link.exists():
        link.symlink_to(secret)
    return secret


def _escapes(root, secret) -> list[str]:
    rel = "/".join([".."] * len(root.parts)) + secret.as_posix()
    return [
        secret.as_uri(),  # plainly elsewhere
        root.as_uri() + "/" + rel,  # <root>/../../…
        root.as_uri() + "/" + rel.replace("..", "%2e%2e"),  # the same, percent-encoded
        (root / "src" / "linked_secret.txt").as_uri(),  # a symlink inside the workspace
    ]


@pytest.mark.parametrize("which", range(4))
async def test_manual_context_outside_the_workspace_is_refused(ctx, context_repo, outside_file,
                                                               which):
    target = _escapes(context_repo, outside_file)[which]
    error = await ctx.error(RAG_INJECT_CONTEXT, {
        "mode": "security", "query": "password", "tokenBudget": 2000,
        "manualContext": [target]})
    assert error["code"] == -32602
    assert "manualContext[0]" in error["message"]
    assert "outside the workspace folders" in error["message"]
    assert "hunter2" not in error["message"]
    if which == 3:  # inside by its name: where it leads is what makes it outside
        assert f"(a link to {outside_file})" in error["message"]


async def test_an_active_file_outside_the_workspace_is_never_read(ctx, context_repo,
                                                                  outside_file):
    error = await ctx.error(RAG_INJECT_CONTEXT, {  # nothing to derive a query from
        "mode": "debugger", "tokenBudget": 2000,
        "activeFile": {"uri": outside_file.as_uri()}})
    assert error["code"] == -32602 and "outside the workspace folders" in error["message"]
    result = await request(ctx, RAG_INJECT_CONTEXT, {  # with a query: it works, unread
        "mode": "debugger", "query": "retry failed jobs", "tokenBudget": 2000,
        "activeFile": {"uri": outside_file.as_uri()}})
    assert "hunter2" not in result["context"] + result["query"]
    assert result["items"]


async def test_a_selection_past_the_end_of_the_active_file_gets_32602(ctx, context_repo):
    error = await ctx.error(RAG_INJECT_CONTEXT, {
        "mode": "debugger", "tokenBudget": 2000,
        "activeFile": {"uri": uri(context_repo, "src/jobs/runner.py"),
                       "selection": lsp_lines(500, 510)}})
    assert error["code"] == -32602
    assert "activeFile.selection: lines 500-510" in error["message"]


@pytest.mark.parametrize("method", [RAG_INJECT_CONTEXT, RAG_KB_SEARCH, "rag/search"])
async def test_a_huge_query_is_refused_quickly_with_a_short_message(ctx, method):
    params = {"mode": "debugger", "query": "retry " * 400_000, "tokenBudget": 100}
    if method == "rag/search":
        params = {"query": params["query"]}
    error = await ctx.error(method, params)
    assert error["code"] == -32602
    assert "$.query" in error["message"]
    assert "must be at most 10,000 characters (got 2,400,000)" in error["message"]
    assert len(error["message"]) < 500


async def test_since_after_until_gets_32602(ctx):
    for method in (RAG_KB_SEARCH, RAG_KB_LIST):
        params = {"mode": "debugger", "since": "2026-02-01T00:00:00Z",
                  "until": "2026-01-01T00:00:00Z"}
        if method == RAG_KB_SEARCH:
            params["query"] = "retries"
        error = await ctx.error(method, params)
        assert error["code"] == -32602 and "is after $.until" in error["message"]


@pytest.mark.parametrize("which", range(4))
async def test_an_anchor_outside_the_workspace_gets_32602(ctx, context_repo, outside_file,
                                                          which):
    target = _escapes(context_repo, outside_file)[which]
    error = await ctx.error(RAG_KB_ADD, {
        "mode": "debugger", "content": "x",
        "anchors": [{"uri": target, "range": lsp_lines(1, 1)}]})
    assert error["code"] == -32602
    assert "$.anchors[0].uri" in error["message"]
