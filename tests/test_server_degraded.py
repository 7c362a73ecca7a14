"""Without a usable model the server says so once, keeps lexical search working on an
existing index, and reports `mode: "lexical"`."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from rag_lsp.server.methods import RAG_STATUS
from tests.conftest import indexed_sample
from tests.lsp_support import SERVER, Recorder, initialize_params, plain, search


@pytest.fixture(scope="session")
def indexed_repo(tmp_path_factory, embedder):
    root = indexed_sample(tmp_path_factory.mktemp("degraded"), embedder).root  # model worked
    empty_model_dir = root.parent / "no-model-here"
    empty_model_dir.mkdir()
    return root, empty_model_dir


@pytest_lsp.fixture(config=SERVER, scope="session")
async def no_model(lsp_client: LanguageClient, indexed_repo):
    root, model_dir = indexed_repo
    lsp_client.recorder = Recorder(lsp_client)
    await lsp_client.initialize_session(
        initialize_params([root], {"modelDir": str(model_dir)}))
    await lsp_client.recorder.wait_for_state("degraded")
    yield
    await lsp_client.shutdown_session()


async def test_the_user_is_told_once_why_search_is_lexical(no_model, indexed_repo):
    warnings = [m.message for m in no_model.messages if m.type == types.MessageType.Warning]
    assert len(warnings) == 1
    assert "semantic search is off" in warnings[0] and str(indexed_repo[1]) in warnings[0]
    status = plain(await no_model.protocol.send_request_async(RAG_STATUS, None))
    assert status["state"] == "degraded" and status["model"]["loaded"] is False
    assert "rag-lsp model install" in status["degradedReason"]


async def test_lexical_search_still_answers(no_model):
    result = await search(no_model, "hash password with salt")
    assert result["mode"] == "lexical"
    assert result["results"][0]["path"] == "src/auth/passwords.py"
    assert any("semantic search is unavailable" in w for w in result["warnings"])
