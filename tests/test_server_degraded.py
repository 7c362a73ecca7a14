"""The server when something it needs is missing or broken, run in this process
(``inprocess_lsp``): without a usable model it says so once, keeps lexical search working on
an existing index, and reports `mode: "lexical"`; an index damaged under it is reported on
the next search and rebuilt."""

from __future__ import annotations

import pytest

from rag_lsp.server.methods import RAG_SEARCH, RAG_STATUS
from tests.conftest import indexed_sample, make_sample_root
from tests.inprocess_lsp import InProcessServer, capabilities_of


@pytest.fixture(scope="module")
def indexed_repo(tmp_path_factory, embedder):
    root = indexed_sample(tmp_path_factory.mktemp("degraded"), embedder).root  # model worked
    empty_model_dir = root.parent / "no-model-here"
    empty_model_dir.mkdir()
    return root, empty_model_dir


@pytest.fixture(scope="module")
async def no_model(indexed_repo):
    """VS Code's way in, with `modelDir` pointing at an empty folder: the server loads (and
    fails to load) the model itself."""
    root, model_dir = indexed_repo
    async with InProcessServer(answer_requests=True) as lsp:
        await lsp.start(root, capabilities_of("visual-studio-code"), {"modelDir": str(model_dir)})
        await lsp.wait_for_state("degraded")
        yield lsp


async def test_the_user_is_told_once_why_search_is_lexical(no_model, indexed_repo):
    warnings = no_model.shown(2)
    assert len(warnings) == 1
    assert "semantic search is off" in warnings[0] and str(indexed_repo[1]) in warnings[0]
    status = await no_model.result(RAG_STATUS)
    assert status["state"] == "degraded" and status["model"]["loaded"] is False
    assert "rag-lsp model install" in status["degradedReason"]


async def test_lexical_search_still_answers(no_model):
    result = await no_model.result(RAG_SEARCH, {"query": "hash password with salt"})
    assert result["mode"] == "lexical"
    assert result["results"][0]["path"] == "src/auth/passwords.py"
    assert any("semantic search is unavailable" in w for w in result["warnings"])


def _paths(answer: dict) -> list[str]:
    assert "result" in answer, answer
    return [r["path"] for r in answer["result"]["results"]]


async def test_an_index_damaged_under_the_server_is_reported_and_rebuilt(tmp_path, embedder):
    """Data files lost while the server runs: the next search says so and starts a rebuild;
    once the folder is ready again, searches answer."""
    root = make_sample_root(tmp_path)
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(root, options={})
        await lsp.wait_for_state("ready")
        for data in (root / ".rag-lsp" / "chunks.lance" / "data").iterdir():
            data.unlink()
        mark = len(lsp.statuses())
        answer = await lsp.request(RAG_SEARCH, {"query": "follow_redirects", "mode": "lexical"})
        assert answer["error"]["data"]["kind"] == "index-corrupt", answer
        assert "being rebuilt" in answer["error"]["message"]
        await lsp.wait_for_state("ready", after=mark)
        assert _paths(await lsp.request(RAG_SEARCH, {"query": "follow_redirects",
                                                     "mode": "lexical"}))[:1] == [
            "src/http/client.py"]
