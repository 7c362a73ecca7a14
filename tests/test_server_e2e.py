"""The real server process over stdio, with the real model and a real LanceDB on disk,
driven like VS Code drives it (pytest-lsp client with VS Code's capabilities).

One server for the module (starting one costs a model load and a first index), but no test
depends on another, nor on the order they run in: each starts from the same settled state
(the sample workspace indexed, default settings, nothing under way: ``settled``), puts back
what it changes (files, settings) before it ends, and reads only what the server sent
during it. Every index status a test receives is checked against its schema, and an error
shown to the user fails the test it happened in.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from rag_lsp.server.methods import RAG_REINDEX, RAG_SEARCH, RAG_STATUS
from rag_lsp.server.protocol import problems
from tests.conftest import SAMPLE_FILES, make_sample_root, write_files
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


@dataclass
class Startup:
    """What the server sent up to its first ``ready``: the first index, as a user sees it."""

    statuses: list[dict]
    progress: list[list]  # the $/progress reports of each token, in the order begun
    errors: list[str]


@pytest_lsp.fixture(config=SERVER, scope="session")
async def client(lsp_client: LanguageClient, repo):
    lsp_client.recorder = Recorder(lsp_client)
    lsp_client.set_configuration({"ragLsp": {}})
    await lsp_client.initialize_session(initialize_params([repo]))
    ready = await lsp_client.recorder.wait_for_state("ready")
    statuses = lsp_client.recorder.statuses
    lsp_client.startup = Startup(
        statuses[: statuses.index(ready) + 1],
        [list(reports) for reports in lsp_client.progress_reports.values() if reports],
        _errors_shown(lsp_client, 0),
    )
    yield
    await lsp_client.shutdown_session()


def _errors_shown(client, since: int) -> list[str]:
    return [m.message for m in client.messages[since:] if m.type == types.MessageType.Error]


async def _status(client) -> dict:
    return plain(await client.protocol.send_request_async(RAG_STATUS, None))


async def _is_settled(client, repo) -> bool:
    """The sample workspace alone, indexed, with default settings, no run under way."""
    status = await _status(client)
    folders = status["folders"]
    if not (status["state"] == "ready" and status["enabled"] and not status["settingsProblems"]
            and [f["uri"] for f in folders] == [repo.as_uri()]
            and folders[0]["files"] == len(SAMPLE_FILES)):
        return False
    # The default topK (10) in effect, not a test's: every sample file can be returned.
    result = await search(client, "password hashing", threshold=-1)
    return len(result["results"]) == len(SAMPLE_FILES)


@dataclass
class Since:
    """Where the session stood when a test began: it reads only what came after."""

    statuses: int
    logs: int
    messages: int
    schema_problems: int


@pytest.fixture(autouse=True)
async def settled(client, repo):
    """Each test's explicit setup: wait for the server to be in the settled state (a test
    before may have left a run or a settings change landing), then mark where the session
    stands. After the test: the statuses it received matched their schema, and no error
    was shown to the user meanwhile."""
    await wait_until(lambda: _is_settled(client, repo),
                     what="the server settled on the sample workspace with default settings")
    recorder = client.recorder
    since = Since(len(recorder.statuses), len(client.log_messages), len(client.messages),
                  len(recorder.schema_problems))
    client.since = since
    yield since
    assert recorder.schema_problems[since.schema_problems:] == []
    assert _errors_shown(client, since.messages) == []


async def test_initial_indexing_reports_progress_and_finds_a_known_function(client, repo):
    startup = client.startup  # the first index, whenever this test runs
    statuses = [s["state"] for s in startup.statuses]
    assert "indexing" in statuses and statuses[-1] == "ready"
    ready = startup.statuses[-1]
    assert ready["files"] == len(SAMPLE_FILES) and ready["chunks"] > 0
    assert all(problems("rag/indexStatus", "params", s) == [] for s in startup.statuses)
    assert startup.errors == []
    # Work-done progress: begin … end on one token.
    assert startup.progress, "no $/progress was sent"
    kinds = [type(r).__name__ for r in startup.progress[0]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert startup.progress[0][0].cancellable is True

    result = await search(client, "follow HTTP redirects to the Location header")
    assert result["partial"] is False and result["mode"] == "hybrid"
    timings = result["timings"]  # the engine's parts, within the server's whole time
    assert 0 < timings["queryEmbeddingMs"] + timings["vectorMs"] < timings["engineMs"]
    assert timings["engineMs"] <= result["tookMs"]
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


@pytest.fixture
async def scratch(client):
    """Files a test creates in the sample workspace (it lists them here): deleted, and
    reported deleted, when it ends, however it ends."""
    paths: list[Path] = []
    yield paths
    gone = [p for p in paths if p.exists()]
    for path in gone:
        path.unlink()
    if gone:
        send_file_events(client, *((p, Deleted) for p in gone))


async def test_created_modified_renamed_and_deleted_files_are_reflected(client, repo, scratch):
    new = repo / "src/billing/ledger.py"
    renamed = repo / "src/billing/refunds.py"
    scratch.extend([new, renamed])
    new.parent.mkdir(parents=True, exist_ok=True)
    new.write_text("def tally_quarterly_receipts(lines):\n    return sum(lines)  # receipts\n")
    send_file_events(client, (new, Created))
    await _appears(client, "tally quarterly receipts", "src/billing/ledger.py")

    new.write_text("def apply_refund_voucher(order):\n    return order.refund()  # vouchers\n")
    send_file_events(client, (new, Changed))
    await _appears(client, "refund voucher", "src/billing/ledger.py")
    assert "src/billing/ledger.py" not in paths_of(
        await search(client, "tally quarterly receipts", mode="lexical"))

    new.rename(renamed)
    send_file_events(client, (new, Deleted), (renamed, Created))
    await _appears(client, "refund voucher", "src/billing/refunds.py")
    assert "src/billing/ledger.py" not in paths_of(
        await search(client, "refund voucher", mode="lexical"))

    renamed.unlink()
    send_file_events(client, (renamed, Deleted))
    await _appears(client, "refund voucher", "src/billing/refunds.py", present=False)


def _save(client, path) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=path.as_uri())))


async def test_a_saved_document_is_reindexed(client, repo):
    path = repo / "src/cache/lru.py"
    original = path.read_text()
    try:
        path.write_text(original + "\n\ndef purge_stale_tombstones(cache):\n    cache.clear()\n")
        _save(client, path)
        await _appears(client, "purge stale tombstones", "src/cache/lru.py")
    finally:
        path.write_text(original)
        _save(client, path)
    await _appears(client, "purge stale tombstones", "src/cache/lru.py", present=False)


def _folders_changed(client, *, added=(), removed=()) -> None:
    def folders(paths):
        return [types.WorkspaceFolder(uri=p.as_uri(), name=p.name) for p in paths]
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(added=folders(added),
                                                removed=folders(removed))))


@asynccontextmanager
async def _own_folder(client, root):
    """A workspace folder of the test's own, opened (and indexed) beside the sample one, and
    closed at the end: its log lines are the ones that start with its name."""
    write_files(root, {"README.md": "# Scratch folder\n\nFor one test.\n"})
    _folders_changed(client, added=[root])

    async def indexed():
        return any(f["uri"] == root.as_uri() and f["state"] == "ready" and f["files"] == 1
                   for f in (await _status(client))["folders"])
    try:
        await wait_until(indexed, what=f"{root.name} indexed")
        yield
    finally:
        _folders_changed(client, removed=[root])


_INDEXED = re.compile(r"changed files applied \((\d+) indexed")


async def test_a_burst_of_200_changes_is_applied_in_a_few_batches(client, tmp_path):
    root = tmp_path / "burst-workspace"
    async with _own_folder(client, root):
        burst = root / "burst"
        burst.mkdir()
        for i in range(200):
            path = burst / f"module_{i:03}.py"
            path.write_text(f"def handler_number_{i}():\n    return 'zebra quartz {i}'\n")
            send_file_events(client, (path, Created))
        await _appears(client, "zebra quartz 199", "burst/module_199.py")

        def batches() -> list[str]:
            return [m.message for m in client.log_messages[client.since.logs:]
                    if m.message.startswith(f"{root.name}: ")
                    and "changed files applied" in m.message]

        async def all_applied():
            folders = (await _status(client))["folders"]
            # rag/status counts the stored files, which are all there once the update's last
            # write commits; the update's log line comes when it returns, a moment later. A
            # path drafted while an update took it is pending again (file_events._draft_saved),
            # and the next batch finds it unchanged (a CI run logged 174 + 28 paths, 174 + 26
            # indexed), so the files indexed are counted, not the paths.
            indexed = sum(int(found.group(1)) for found in map(_INDEXED.search, batches())
                          if found)
            return ([f["files"] for f in folders if f["uri"] == root.as_uri()] == [1 + 200]
                    and indexed >= 200)
        await wait_until(all_applied, what="all 200 files indexed, and logged as applied")
        assert 1 <= len(batches()) <= 10, batches()  # coalesced, not one update per event

        for path in burst.iterdir():
            path.unlink()
        burst.rmdir()
        send_file_events(client, (burst, Deleted))
        await _appears(client, "zebra quartz 199", "burst/module_199.py", present=False)


def _module_with_functions(n: int) -> str:
    body = [f'"""Helpers of part {n}: parsing, rendering and retrying uploads."""', ""]
    for k in range(5):
        body += ["", f"def step_{n}_{k}(value, retries=3):",
                 f'    """Step {k} of part {n}: parse the value, render it and retry."""',
                 "    for attempt in range(retries):",
                 f"        value = value + {n * 10 + k}  # attempt {{attempt}}",
                 "    return value", ""]
    return "\n".join(body)


async def test_new_files_answer_by_their_words_before_the_model_has_read_them(client,
                                                                              tmp_path):
    """lexicalFirst through the server: a folder of new files is searchable at once, its files
    found as drafted windows (kind text, no symbol) before their chunks are written."""
    root = tmp_path / "draft-workspace"
    files = {f"pkg/mod_{n:02d}.py": _module_with_functions(n) for n in range(40)}
    files["zz/ledger.py"] = (
        '"""Reconcile ledger entries against the monthly bank statement."""\n\n\n'
        "class LedgerReconciler:\n"
        '    """Matches each ledger entry with a statement line."""\n\n'
        "    def reconcile(self, entries, statement):\n"
        "        return [e for e in entries if e in statement]\n")
    write_files(root, files)
    _folders_changed(client, added=[root])
    try:
        first_seen: list[dict] = []

        async def ledger_found():
            result = await search(client, "reconcile ledger entries with the bank statement")
            first_seen.extend(r for r in result["results"]
                              if r["uri"].endswith("/zz/ledger.py"))
            return first_seen

        await wait_until(ledger_found, what="the ledger file found")
        # Found before its chunks were written (they take the model ~10 s or more): a draft.
        assert (first_seen[0]["kind"], first_seen[0]["symbol"]) == ("text", ""), first_seen[0]
    finally:
        _folders_changed(client, removed=[root])


async def test_a_folder_opened_through_a_link_follows_events_spelled_its_way(client,
                                                                          tmp_path):
    """An editor reports events with the folder's path as it opened it (macOS's /tmp, a
    linked home folder) while the index keeps the real path: every event was dropped."""
    real, link = tmp_path / "real-ws", tmp_path / "linked-ws"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    async with _own_folder(client, link):
        new = link / "ledger.py"
        new.write_text("def settle_quarterly_escrow():\n    return 'escrow'\n")
        send_file_events(client, (new, Created))
        await _appears(client, "settle quarterly escrow", "ledger.py")
        hits = (await search(client, "settle quarterly escrow", mode="lexical"))["results"]
        assert hits[0]["uri"] == new.as_uri()  # as the editor spells it: its own file
        _folders_changed(client, added=[real])  # the same folder, by its real path
        client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=link.as_uri() + "/", name="again")],
                removed=[])))
        await search(client, "settle quarterly escrow")  # (the changes are handled in order)
        folders = [f["uri"] for f in (await _status(client))["folders"]]
        assert folders.count(link.as_uri()) == 1, folders  # one folder, one index
        assert real.as_uri() not in folders and link.as_uri() + "/" not in folders
        new.unlink()
        send_file_events(client, (new, Deleted))
        await _appears(client, "settle quarterly escrow", "ledger.py", present=False)
    # Removed under one spelling, open under the other; closed with the last. Folder changes
    # are applied in the order sent (one lock), so a folder added after the removal is open
    # only once the removal is handled.
    marker = tmp_path / "marker-ws"
    marker.mkdir()
    _folders_changed(client, added=[marker])

    async def listed() -> list[str]:
        return [f["uri"] for f in (await _status(client))["folders"]]

    async def marker_open() -> bool:
        return marker.as_uri() in await listed()
    await wait_until(marker_open, what="the folder added after the removal open")
    assert link.as_uri() in await listed()
    _folders_changed(client, removed=[real, marker])
    await wait_until(lambda: _folder_is(client, link, "ready", files=None, present=False),
                     what="the folder closed with its last spelling")


async def test_an_index_folder_deleted_under_the_server_is_built_again(client, tmp_path):
    """`git clean -xdf` takes the index folder: searches came back empty, and the next update
    made an index of its own files alone, for good."""
    root = tmp_path / "cleaned-workspace"
    async with _own_folder(client, root):
        shutil.rmtree(root / ".rag-lsp")
        send_file_events(client, (root / ".rag-lsp", Deleted))
        await _appears(client, "scratch folder for one test", "README.md")
        await wait_until(lambda: _folder_is(client, root, "ready", files=1),
                         what="the folder indexed whole again")


async def test_a_folder_back_after_an_error_is_indexed_whole_and_ready(client, tmp_path):
    root = tmp_path / "vanishing-workspace"
    async with _own_folder(client, root):
        shutil.rmtree(root)
        send_file_events(client, (root / "README.md", Deleted))
        await wait_until(lambda: _folder_is(client, root, "error"), what="the folder's error")
        write_files(root, {"README.md": "# Scratch folder\n\nBack again.\n",
                           "notes.md": "# Quarterly escrow notes\n"})
        send_file_events(client, (root / "notes.md", Created))
        await wait_until(lambda: _folder_is(client, root, "ready", files=2),
                         what="the folder ready again, both files indexed")


async def test_a_folder_nested_in_another_keeps_both_indexes_current(client, tmp_path):
    """Events for a file in the inner folder reached its index alone: the outer one served
    the old text for good."""
    root = tmp_path / "outer-workspace"
    inner = root / "inner"
    async with _own_folder(client, root):
        write_files(inner, {"notes.md": "# Walrus ledger\n\nThe walrus ledger balances.\n"})
        send_file_events(client, (inner, Created))
        await wait_until(lambda: _folder_is(client, root, "ready", files=2),
                         what="the outer folder ready with the inner file")
        _folders_changed(client, added=[inner])
        try:
            await wait_until(lambda: _folder_is(client, inner, "ready", files=1),
                             what="the inner folder indexed")
            (inner / "notes.md").write_text("# Narwhal journal\n\nThe narwhal journal.\n")
            send_file_events(client, (inner / "notes.md", Changed))

            async def both_current() -> bool:
                new = await search(client, "narwhal journal", mode="lexical")
                old = await search(client, "walrus ledger", mode="lexical")
                return ({r["folder"] for r in new["results"]} == {root.as_uri(), inner.as_uri()}
                        and old["results"] == [])
            await wait_until(both_current, what="the edit in both folders' indexes")
        finally:
            _folders_changed(client, removed=[inner])


async def _folder_is(client, root, state: str, files: int | None = None,
                     present: bool = True) -> bool:
    return present == any(f["uri"] == root.as_uri() and (not present or f["state"] == state)
                          and (files is None or f["files"] == files)
                          for f in (await _status(client))["folders"])


async def test_the_folder_settings_file_is_honoured_and_followed(client, repo, scratch):
    config = repo / ".rag-lsp.json"
    scratch.append(config)
    config.write_text('{"exclude": ["docs/"]}')
    send_file_events(client, (config, Created))
    await _appears(client, "nginx reverse proxy container", "docs/guide.md", present=False)
    config.unlink()
    send_file_events(client, (config, Deleted))
    await _appears(client, "nginx reverse proxy container", "docs/guide.md")


async def test_a_fixed_folder_settings_file_takes_its_problems_with_it(client, repo, scratch):
    config = repo / ".rag-lsp.json"
    scratch.append(config)
    config.write_text('{"topK": 0}')
    send_file_events(client, (config, Created))

    async def listed(present: bool):
        problems = (await _status(client))["settingsProblems"]
        return any("`topK` = 0" in p for p in problems) == present
    await wait_until(lambda: listed(True), what="the file's problem in the status")
    config.write_text('{"topK": 4}')
    send_file_events(client, (config, Changed))
    await wait_until(lambda: listed(False), what="the problem gone once the file is fixed")
    config.write_text('{"topK": 0}')
    send_file_events(client, (config, Changed))
    await wait_until(lambda: listed(True), what="the file's problem back")
    config.unlink()
    send_file_events(client, (config, Deleted))
    await wait_until(lambda: listed(False), what="the problem gone with the file")


@pytest.fixture
async def reconfigure(client):
    """Change the editor's settings (as VS Code does: a change notification, then the
    server asks for them); back to the defaults when the test ends."""
    def change(settings: dict) -> None:
        client.set_configuration({"ragLsp": settings})
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=None))
    yield change
    change({})


async def test_settings_changes_apply_and_invalid_ones_are_shown(client, reconfigure):
    reconfigure({"topK": 1})

    async def top_one():
        return len((await search(client, "password hashing", threshold=-1))["results"]) == 1
    await wait_until(top_one, what="topK 1 applied")

    seen = len(client.messages)
    reconfigure({"topK": "many", "serachMode": "vector"})

    async def warned():
        return len(client.messages) > seen
    await wait_until(warned, what="a message about the invalid settings")
    warning = client.messages[seen]
    assert warning.type == types.MessageType.Warning
    assert "`topK` = 'many'" in warning.message and "must be an integer" in warning.message
    assert "did you mean `searchMode`" in warning.message
    async def default_top_k():
        result = await search(client, "password hashing", threshold=-1)
        return len(result["results"]) == len(SAMPLE_FILES)
    await wait_until(default_top_k, what="the default topK (10) again")
    status = await _status(client)
    assert len(status["settingsProblems"]) == 2


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


async def test_editor_buffers_are_not_kept_and_their_changes_never_fail(client, repo):
    """The server follows saves, not buffers: pygls kept every open buffer's text and logged
    an error for a change to one it had not seen opened."""
    never_opened = (repo / "src/never_opened.py").as_uri()
    big = repo / "src/cache/lru.py"
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=big.as_uri(), language_id="python", version=1, text="x = 1\n" * 200_000)))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=never_opened, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(9, 0), types.Position(9, 0)), text="y = 2\n")]))
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        types.TextDocumentIdentifier(uri=never_opened)))
    result = await search(client, "least recently used cache")  # still serving, from disk
    assert "src/cache/lru.py" in paths_of(result)
    logged = [m.message for m in client.log_messages[client.since.logs:]
              if m.type in (types.MessageType.Error, types.MessageType.Warning)]
    assert logged == []
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        types.TextDocumentIdentifier(uri=big.as_uri())))


async def test_status_describes_folders_and_model(client, repo):
    status = await _status(client)
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


async def test_disabling_stops_the_server_and_enabling_resumes(client, reconfigure):
    mark = len(client.recorder.statuses)
    reconfigure({"enabled": False})
    await client.recorder.wait_for_state("disabled", after=mark)
    with pytest.raises(JsonRpcException) as disabled:
        await client.protocol.send_request_async(RAG_SEARCH, {"query": "redirects"})
    assert "disabled in settings" in disabled.value.message
    status = await _status(client)
    assert status["state"] == "disabled" and status["folders"] == []

    mark = len(client.recorder.statuses)
    reconfigure({"enabled": True})
    await client.recorder.wait_for_state("ready", after=mark)
    assert (await search(client, "redirects"))["results"][0]["path"] == "src/http/client.py"
