"""A client that cannot register file watchers (Neovim 0.7's capabilities): the server watches
the folders itself. Two workspace folders, an absolute indexPath, folders added and removed."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from rag_lsp.server.methods import RAG_STATUS
from tests.conftest import write_files
from tests.lsp_support import (
    SERVER,
    Recorder,
    initialize_params,
    paths_of,
    plain,
    search,
    wait_until,
)

FRONTEND = {
    "ui/forms.js": "function validateSignupForm(form) { return form.email.includes('@'); }\n",
}
BACKEND = {
    "api/orders.py": "def cancel_pending_order(order_id):\n"
                     "    \"\"\"Cancel an order that has not shipped.\"\"\"\n",
}
EXTRA = {
    "tools/report.py": "def export_monthly_sales_report(month):\n"
                       "    \"\"\"Write sales per month to CSV.\"\"\"\n",
}


@pytest.fixture(scope="session")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("multi")
    roots = {}
    for name, files in (("frontend", FRONTEND), ("backend", BACKEND), ("extra", EXTRA)):
        roots[name] = base / name
        write_files(roots[name], files)
    roots["store"] = base / "editor-storage"
    return roots


@pytest_lsp.fixture(config=SERVER, scope="session")
async def nvim_like(lsp_client: LanguageClient, folders):
    lsp_client.recorder = Recorder(lsp_client)
    await lsp_client.initialize_session(initialize_params(
        [folders["frontend"], folders["backend"]],
        {"indexPath": str(folders["store"])},
        client="neovim@v0.7.0",
    ))
    await lsp_client.recorder.wait_for_state("ready")
    yield
    await lsp_client.shutdown_session()


async def test_no_watcher_registration_is_attempted(nvim_like):
    assert nvim_like.recorder.registrations == []


async def test_search_spans_both_folders_with_their_own_indexes(nvim_like, folders):
    result = await search(nvim_like, "validate the signup form email", threshold=-1)
    by_folder = {r["folder"] for r in result["results"]}
    assert by_folder == {folders["frontend"].as_uri(), folders["backend"].as_uri()}
    assert result["results"][0]["path"] == "ui/forms.js"
    status = plain(await nvim_like.protocol.send_request_async(RAG_STATUS, None))
    index_paths = {f["indexPath"] for f in status["folders"]}
    assert len(index_paths) == 2  # one subfolder of the editor's storage folder each
    assert all(p.startswith(str(folders["store"])) for p in index_paths)


async def test_files_written_on_disk_are_picked_up_by_the_server_watcher(nvim_like, folders):
    new = folders["backend"] / "api" / "refunds.py"
    new.write_text("def issue_partial_refund(payment):\n    '''Refund part of a payment.'''\n")

    async def found():
        return "api/refunds.py" in paths_of(await search(nvim_like, "partial refund",
                                                         mode="lexical"))
    await wait_until(found, timeout=10, what="a file written on disk is searchable")

    new.unlink()

    async def gone():
        return "api/refunds.py" not in paths_of(await search(nvim_like, "partial refund",
                                                             mode="lexical"))
    await wait_until(gone, timeout=10, what="a deleted file leaves the results")


async def test_workspace_folders_can_be_added_and_removed(nvim_like, folders):
    added = types.WorkspaceFolder(uri=folders["extra"].as_uri(), name="extra")
    removed = types.WorkspaceFolder(uri=folders["frontend"].as_uri(), name="frontend")
    mark = len(nvim_like.recorder.statuses)
    nvim_like.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(added=[added], removed=[removed])))
    await nvim_like.recorder.wait_for_state("ready", after=mark + 1)

    async def switched():
        result = await search(nvim_like, "monthly sales report", threshold=-1)
        folder_uris = {r["folder"] for r in result["results"]}
        return folder_uris == {folders["extra"].as_uri(), folders["backend"].as_uri()}
    await wait_until(switched, timeout=30, what="search follows the folder change")


async def test_cancelling_the_progress_stops_an_indexing_run(nvim_like, folders):
    big = folders["store"].parent / "big"
    write_files(big, {
        f"pkg/module_{i:03}.py": "".join(
            f"def step_{i}_{j}(value):\n    '''Stage {j} of pipeline {i}.'''\n"
            f"    return value * {j} + {i}\n\n" for j in range(6))
        for i in range(300)
    })
    known = set(nvim_like.progress_reports)
    nvim_like.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(
            added=[types.WorkspaceFolder(uri=big.as_uri(), name="big")], removed=[])))

    async def run_started():
        return [t for t, reports in nvim_like.progress_reports.items()
                if t not in known and reports]
    mark = len(nvim_like.recorder.statuses)
    await wait_until(run_started, timeout=30, what="a progress begin for the new folder")
    token = (await run_started())[0]

    def percentages():
        return [s["percentage"] for s in nvim_like.recorder.statuses[mark:]
                if s["state"] == "indexing" and s["percentage"] is not None]

    async def progressing():  # cancel mid-run: a cancelled run stops within one batch
        return percentages()
    await wait_until(progressing, timeout=60, what="a status with the run's percentage")
    during = await search(nvim_like, "stage of pipeline", mode="lexical")
    assert during["partial"] is True  # a first index: results come from what it has so far
    nvim_like.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))

    async def ended():
        reports = nvim_like.progress_reports[token]
        return isinstance(reports[-1], types.WorkDoneProgressEnd)
    await wait_until(ended, timeout=60, what="the cancelled run to end")
    assert "cancelled" in nvim_like.progress_reports[token][-1].message
    status = plain(await nvim_like.protocol.send_request_async(RAG_STATUS, None))
    big_status = next(f for f in status["folders"] if f["uri"] == big.as_uri())
    assert big_status["state"] == "ready" and "cancelled" in big_status["message"]
    assert big_status["files"] < 300
    # The status notification carried the run's progress, as a percentage.
    assert all(0 <= p <= 100 for p in percentages())
    assert nvim_like.recorder.schema_problems == []
    nvim_like.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(
            added=[], removed=[types.WorkspaceFolder(uri=big.as_uri(), name="big")])))
