"""The real server process over stdio, with the real model and a real LanceDB on disk,
driven like VS Code drives it (pytest-lsp client with VS Code's capabilities)."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from rag_lsp.server.methods import RAG_REINDEX, RAG_SEARCH, RAG_STATUS
from rag_lsp.server.protocol import problems
from tests.conftest import SAMPLE_FILES, make_sample_root
from tests.lsp_support import (
    SERVER,
    Recorder,
    initialize_params,
    paths_of,
    plain,
    search,
    send_file_events,
    wait_until,
)

Created, Changed, Deleted = (types.FileChangeType.Created, types.FileChangeType.Changed,
                             types.FileChangeType.Deleted)


@pytest.fixture(scope="session")
def repo(tmp_path_factory):
    return make_sample_root(tmp_path_factory.mktemp("e2e"))


@pytest_lsp.fixture(config=SERVER, scope="session")
async def client(lsp_client: LanguageClient, repo):
    lsp_client.recorder = Recorder(lsp_client)
    lsp_client.set_configuration({"ragLsp": {}})
    await lsp_client.initialize_session(initialize_params([repo]))
    await lsp_client.recorder.wait_for_state("ready")
    yield
    await lsp_client.shutdown_session()


async def test_initial_indexing_reports_progress_and_finds_a_known_function(client, repo):
    statuses = [s["state"] for s in client.recorder.statuses]
    assert "indexing" in statuses and statuses[-1] == "ready"
    ready = client.recorder.statuses[-1]
    assert ready["files"] == len(SAMPLE_FILES) and ready["chunks"] > 0
    # Work-done progress: begin … end on one token.
    runs = [reports for reports in client.progress_reports.values() if reports]
    assert runs, "no $/progress was sent"
    kinds = [type(r).__name__ for r in runs[0]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert runs[0][0].cancellable is True

    result = await search(client, "follow HTTP redirects to the Location header")
    assert result["partial"] is False and result["mode"] == "hybrid"
    best = result["results"][0]
    assert best["path"] == "src/http/client.py"
    assert best["uri"] == (repo / "src/http/client.py").as_uri()
    assert best["symbol"] == "follow_redirects"
    source = (repo / best["path"]).read_text().splitlines()
    first_line = source[best["range"]["start"]["line"]]  # LSP lines are 0-based
    assert first_line.startswith("def follow_redirects")


async def test_the_editor_is_asked_for_file_events(client):
    methods = [r.method for r in client.recorder.registrations]
    assert methods == [types.WORKSPACE_DID_CHANGE_WATCHED_FILES]


async def _appears(client, query: str, path: str, present: bool = True):
    async def check():
        return (path in paths_of(await search(client, query, mode="lexical"))) == present
    return await wait_until(check, what=f"{path} {'in' if present else 'gone from'} results")


async def test_created_modified_renamed_and_deleted_files_are_reflected(client, repo):
    new = repo / "src/billing/ledger.py"
    new.parent.mkdir(parents=True)
    new.write_text("def tally_quarterly_receipts(lines):\n    return sum(lines)  # receipts\n")
    send_file_events(client, (new, Created))
    await _appears(client, "tally quarterly receipts", "src/billing/ledger.py")

    new.write_text("def apply_refund_voucher(order):\n    return order.refund()  # vouchers\n")
    send_file_events(client, (new, Changed))
    await _appears(client, "refund voucher", "src/billing/ledger.py")
    assert "src/billing/ledger.py" not in paths_of(
        await search(client, "tally quarterly receipts", mode="lexical"))

    renamed = repo / "src/billing/refunds.py"
    new.rename(renamed)
    send_file_events(client, (new, Deleted), (renamed, Created))
    await _appears(client, "refund voucher", "src/billing/refunds.py")
    assert "src/billing/ledger.py" not in paths_of(
        await search(client, "refund voucher", mode="lexical"))

    renamed.unlink()
    send_file_events(client, (renamed, Deleted))
    await _appears(client, "refund voucher", "src/billing/refunds.py", present=False)


async def test_a_saved_document_is_reindexed(client, repo):
    seen_logs = len(client.log_messages)
    path = repo / "src/cache/lru.py"
    original = path.read_text()
    path.write_text(original + "\n\ndef purge_stale_tombstones(cache):\n    cache.clear()\n")
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=path.as_uri())))
    await _appears(client, "purge stale tombstones", "src/cache/lru.py")
    path.write_text(original)
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=path.as_uri())))
    await _appears(client, "purge stale tombstones", "src/cache/lru.py", present=False)

    # A search can see the update before its log line arrives: wait for both saves' lines so
    # the next test counts only its own.
    async def both_logged():
        return sum("changed files applied" in m.message
                   for m in client.log_messages[seen_logs:]) == 2
    await wait_until(both_logged, what="both saves logged")


async def test_a_burst_of_200_changes_is_applied_in_a_few_batches(client, repo):
    burst = repo / "burst"
    burst.mkdir()
    seen_logs = len(client.log_messages)
    for i in range(200):
        path = burst / f"module_{i:03}.py"
        path.write_text(f"def handler_number_{i}():\n    return 'zebra quartz {i}'\n")
        send_file_events(client, (path, Created))
    await _appears(client, "zebra quartz 199", "burst/module_199.py")

    async def all_applied():
        status = plain(await client.protocol.send_request_async(RAG_STATUS, None))
        return status["folders"][0]["files"] == len(SAMPLE_FILES) + 200
    await wait_until(all_applied, what="all 200 files indexed")
    batches = [m.message for m in client.log_messages[seen_logs:]
               if "changed files applied" in m.message]
    applied = sum(int(m.split(": ")[1].split()[0]) for m in batches)
    assert applied == 200
    assert 1 <= len(batches) <= 10, batches  # coalesced, not one update per event

    for path in burst.iterdir():
        path.unlink()
    burst.rmdir()
    send_file_events(client, (burst, Deleted))
    await _appears(client, "zebra quartz 199", "burst/module_199.py", present=False)


async def test_the_folder_settings_file_is_honoured_and_followed(client, repo):
    config = repo / ".rag-lsp.json"
    config.write_text('{"exclude": ["docs/"]}')
    send_file_events(client, (config, Created))
    await _appears(client, "nginx reverse proxy container", "docs/guide.md", present=False)
    config.unlink()
    send_file_events(client, (config, Deleted))
    await _appears(client, "nginx reverse proxy container", "docs/guide.md")


async def _reconfigure(client, settings: dict):
    client.set_configuration({"ragLsp": settings})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))


async def test_settings_changes_apply_and_invalid_ones_are_shown(client):
    await _reconfigure(client, {"topK": 1})

    async def top_one():
        return len((await search(client, "password hashing", threshold=-1))["results"]) == 1
    await wait_until(top_one, what="topK 1 applied")

    seen = len(client.messages)
    await _reconfigure(client, {"topK": "many", "serachMode": "vector"})

    async def warned():
        return len(client.messages) > seen
    await wait_until(warned, what="a message about the invalid settings")
    warning = client.messages[seen]
    assert warning.type == types.MessageType.Warning
    assert "`topK` = 'many'" in warning.message and "must be an integer" in warning.message
    assert "did you mean `searchMode`" in warning.message
    async def default_top_k():  # (a run for an earlier test's edits may still be landing)
        result = await search(client, "password hashing", threshold=-1)
        return len(result["results"]) == len(SAMPLE_FILES)
    await wait_until(default_top_k, what="the default topK (10) again")
    status = plain(await client.protocol.send_request_async(RAG_STATUS, None))
    assert len(status["settingsProblems"]) == 2
    await _reconfigure(client, {})


async def test_malformed_params_get_32602_and_the_server_keeps_serving(client):
    with pytest.raises(JsonRpcException) as missing:
        await client.protocol.send_request_async(RAG_SEARCH, {"topK": 3})
    assert missing.value.code == -32602
    assert "$.query: required" in missing.value.message

    with pytest.raises(JsonRpcException) as wrong:
        await client.protocol.send_request_async(
            RAG_SEARCH, {"query": "x", "topK": 0, "mode": "fuzzy", "filters": {"paths": "*.py"}})
    assert wrong.value.code == -32602
    for fragment in ("$.topK = 0: must be at least 1", "$.mode = 'fuzzy'",
                     "$.filters.paths = '*.py': must be a list"):
        assert fragment in wrong.value.message

    with pytest.raises(JsonRpcException) as folder:
        await client.protocol.send_request_async(RAG_REINDEX, {"folder": "file:///nowhere"})
    assert folder.value.code == -32602 and "$.folder" in folder.value.message

    with pytest.raises(JsonRpcException) as unknown:
        await client.protocol.send_request_async("rag/frobnicate", {})
    assert unknown.value.code == -32601

    assert (await search(client, "LRU cache eviction"))["results"][0]["path"] == "src/cache/lru.py"


async def test_filters_restrict_results(client):
    result = await search(client, "how does this project work", filters={"paths": ["docs/**"]})
    assert paths_of(result) == ["docs/guide.md"]
    result = await search(client, "cache", filters={"languages": ["javascript"]}, mode="lexical")
    assert set(paths_of(result)) <= {"web/static/app.js"}


async def test_status_describes_folders_and_model(client, repo):
    status = plain(await client.protocol.send_request_async(RAG_STATUS, None))
    assert problems(RAG_STATUS, "result", status) == []
    assert status["state"] == "ready" and status["enabled"] is True
    assert status["model"]["loaded"] is True and status["model"]["dimension"] == 384
    assert [f["uri"] for f in status["folders"]] == [repo.as_uri()]
    assert status["folders"][0]["indexPath"] == str(repo / ".rag-lsp")
    assert status["degradedReason"] is None


async def test_a_full_rebuild_answers_from_the_current_index_until_it_is_done(client):
    """The client's "Rebuild index": the new index is made beside the current one, which
    keeps answering (whole, so not partial) and the status says so."""
    mark = len(client.recorder.statuses)
    started = plain(await client.protocol.send_request_async(RAG_REINDEX, {"full": True}))
    assert len(started["started"]) == 1
    during = await search(client, "password hashing", mode="lexical")
    assert during["partial"] is False  # (searches during a first index are: see watching)
    assert during["results"][0]["path"] == "src/auth/passwords.py"
    await client.recorder.wait_for_state("ready", after=mark)
    messages = [s["message"] for s in client.recorder.statuses[mark:]
                if s["state"] == "indexing"]
    assert any("searches use the current index until the rebuild is done" in m
               for m in messages), messages
    after = await search(client, "password hashing")
    assert after["partial"] is False
    assert after["results"][0]["path"] == "src/auth/passwords.py"


async def test_a_cancelled_search_is_answered_with_32800(client):
    msg_id = "cancel-me"
    # A long query (~250 word-pieces) keeps the search busy for a while; the cancel is
    # written right behind the request, so it arrives while the search runs.
    query = " ".join(["where are http redirects followed and how many hops"] * 25)
    pending = asyncio.ensure_future(client.protocol.send_request_async(
        RAG_SEARCH, {"query": query}, msg_id=msg_id))
    await asyncio.sleep(0)  # let the request be written
    client.cancel_request(types.CancelParams(id=msg_id))
    with pytest.raises(JsonRpcException) as cancelled:
        await pending
    assert cancelled.value.code == -32800
    assert (await search(client, "redirects"))["results"]


async def test_disabling_stops_the_server_and_enabling_resumes(client):
    mark = len(client.recorder.statuses)
    await _reconfigure(client, {"enabled": False})
    await client.recorder.wait_for_state("disabled", after=mark)
    with pytest.raises(JsonRpcException) as disabled:
        await client.protocol.send_request_async(RAG_SEARCH, {"query": "redirects"})
    assert "disabled in settings" in disabled.value.message
    status = plain(await client.protocol.send_request_async(RAG_STATUS, None))
    assert status["state"] == "disabled" and status["folders"] == []

    mark = len(client.recorder.statuses)
    await _reconfigure(client, {"enabled": True})
    await client.recorder.wait_for_state("ready", after=mark)
    assert (await search(client, "redirects"))["results"][0]["path"] == "src/http/client.py"


async def test_every_index_status_matched_its_schema(client):
    assert client.recorder.statuses and client.recorder.schema_problems == []


async def test_no_unexpected_errors_were_shown(client):
    errors = [m.message for m in client.messages if m.type == types.MessageType.Error]
    assert errors == []
    await asyncio.sleep(0)
