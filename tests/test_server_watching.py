"""A client that cannot register file watchers (Neovim 0.7's capabilities): the server watches
the folders itself. Two workspace folders, an absolute indexPath, folders added and removed.

The server runs in this process (``inprocess_lsp``), one per test on folders of its own: its
watcher threads are the real ones; ``test_neovim_client`` drives the real process from Neovim.
"""

from __future__ import annotations

import pytest

from rag_lsp.server.methods import RAG_SEARCH, RAG_STATUS
from tests.conftest import write_files
from tests.inprocess_lsp import InProcessServer, capabilities_of
from tests.lsp_support import paths_of, wait_until

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


@pytest.fixture
def folders(tmp_path):
    roots = {}
    for name, files in (("frontend", FRONTEND), ("backend", BACKEND), ("extra", EXTRA)):
        roots[name] = tmp_path / name
        write_files(roots[name], files)
    roots["store"] = tmp_path / "editor-storage"
    return roots


@pytest.fixture
async def nvim_like(folders, embedder):
    async with InProcessServer(embedder=embedder, answer_requests=True) as lsp:
        await lsp.start([folders["frontend"], folders["backend"]],
                        capabilities_of("neovim@v0.7.0"), {"indexPath": str(folders["store"])})
        await lsp.wait_for_state("ready")
        yield lsp


async def search(lsp: InProcessServer, query: str, **params) -> dict:
    return await lsp.result(RAG_SEARCH, {"query": query, **params})


def _folders_changed(added: list, removed: list) -> dict:
    return {"event": {"added": [{"uri": f.as_uri(), "name": f.name} for f in added],
                      "removed": [{"uri": f.as_uri(), "name": f.name} for f in removed]}}


async def test_no_watcher_registration_is_attempted(nvim_like):
    assert nvim_like.requests_sent("client/registerCapability") == []


async def test_search_spans_both_folders_with_their_own_indexes(nvim_like, folders):
    result = await search(nvim_like, "validate the signup form email", threshold=-1)
    by_folder = {r["folder"] for r in result["results"]}
    assert by_folder == {folders["frontend"].as_uri(), folders["backend"].as_uri()}
    assert result["results"][0]["path"] == "ui/forms.js"
    status = await nvim_like.result(RAG_STATUS)
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
    mark = len(nvim_like.statuses())
    nvim_like.notify("workspace/didChangeWorkspaceFolders",
                     _folders_changed(added=[folders["extra"]], removed=[folders["frontend"]]))
    await nvim_like.wait_for_state("ready", after=mark + 1)

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

    def tokens() -> list:
        return list(dict.fromkeys(p["token"] for p in nvim_like.notifications("$/progress")))

    known = set(tokens())
    mark = len(nvim_like.statuses())
    nvim_like.notify("workspace/didChangeWorkspaceFolders",
                     _folders_changed(added=[big], removed=[]))

    async def run_started():
        return [t for t in tokens() if t not in known]
    await wait_until(run_started, timeout=30, what="a progress begin for the new folder")
    token = (await run_started())[0]

    def percentages():
        return [s["percentage"] for s in nvim_like.statuses()[mark:]
                if s["state"] == "indexing" and s["percentage"] is not None]

    async def progressing():  # cancel mid-run: a cancelled run stops within one batch
        return percentages()
    await wait_until(progressing, timeout=60, what="a status with the run's percentage")
    during = await search(nvim_like, "stage of pipeline", mode="lexical")
    assert during["partial"] is True  # a first index: results come from what it has so far
    nvim_like.notify("window/workDoneProgress/cancel", {"token": token})

    async def ended():
        return nvim_like.progress(token)[-1]["kind"] == "end"
    await wait_until(ended, timeout=60, what="the cancelled run to end")
    assert "cancelled" in nvim_like.progress(token)[-1]["message"]
    status = await nvim_like.result(RAG_STATUS)
    big_status = next(f for f in status["folders"] if f["uri"] == big.as_uri())
    assert big_status["state"] == "ready" and "cancelled" in big_status["message"]
    assert big_status["files"] < 300
    # The status notification carried the run's progress, as a percentage.
    assert all(0 <= p <= 100 for p in percentages())


async def test_the_server_keeps_what_it_holds_out_of_full_collections(folders, embedder):
    """Once its folders are open, the server freezes its long-lived objects (a full garbage
    collection walked ~180k of them inside a search; rag_lsp.memory)."""
    async with InProcessServer(embedder=embedder, answer_requests=True) as lsp:
        await lsp.start([folders["frontend"]], capabilities_of("neovim@v0.7.0"),
                        {"indexPath": str(folders["store"])})
        await lsp.wait_for_state("ready")
    assert lsp.froze_objects > 0


async def test_a_ready_folder_is_warmed_up_for_its_first_search(folders, embedder,
                                                                 monkeypatch):
    """Once a run leaves a folder ready, the query session exists and the index's in-memory
    copy loads without any search: a first search does not pay ~230 ms for them."""
    monkeypatch.setattr(embedder, "_query_session", None)  # as in a server just started
    async with InProcessServer(embedder=embedder, answer_requests=True) as lsp:
        await lsp.start([folders["frontend"]], capabilities_of("neovim@v0.7.0"),
                        {"indexPath": str(folders["store"])})
        await lsp.wait_for_state("ready")
        (folder,) = lsp.server.folders.values()
        assert folder.workspace.embedder is embedder  # the test's model, not a second copy
        store = folder.workspace._index.store()  # noqa: SLF001

        async def loaded() -> bool:  # asking vectors_in_memory() would start the load itself
            return store._vectors._matrix is not None  # noqa: SLF001

        await wait_until(loaded, what="the in-memory copy loaded without a search")
        assert embedder._query_session is not None  # noqa: SLF001


async def test_exact_queries_loads_a_model_whose_queries_go_through_model_onnx(folders,
                                                                              embedder):
    """``exactQueries`` is a setting the model depends on: the server loads one for it,
    whose queries use the full model (the shared one uses the query model)."""
    async with InProcessServer(embedder=embedder, answer_requests=True) as lsp:
        await lsp.start([folders["frontend"]], capabilities_of("neovim@v0.7.0"),
                        {"indexPath": str(folders["store"]), "exactQueries": True})
        await lsp.wait_for_state("ready")
        (folder,) = lsp.server.folders.values()
        exact = folder.workspace.embedder
        assert exact is not embedder and exact is lsp.server.embedder
        assert exact.query_onnx_path == exact.files.onnx_path
        assert embedder.query_onnx_path == embedder.files.query_onnx_path
        found = await lsp.request("rag/search", {"query": "render the header"})
        assert "error" not in found, found
