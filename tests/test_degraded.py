"""Without a usable model, an existing index still answers lexically and says why."""

from __future__ import annotations

import shutil

import pytest

from rag_lsp.config import Settings
from rag_lsp.errors import ModelIntegrityError, ModelNotFoundError
from rag_lsp.workspace import Workspace


def reopen_without_model(workspace: Workspace, model_dir) -> Workspace:
    settings = Settings.from_dict({**workspace.settings.to_dict(), "modelDir": str(model_dir)})
    return Workspace.open(workspace.root, settings)


def test_missing_model_falls_back_to_lexical_search(workspace, tmp_path):
    ws = reopen_without_model(workspace, tmp_path / "no-model")
    assert ws.degraded
    response = ws.search("where are redirects followed?")
    assert response.mode == "lexical"
    assert response.results[0].path == "src/http/client.py"
    [warning] = response.warnings
    assert "lexical results only" in warning and "rag-lsp model install" in warning
    status = ws.status()
    assert status.files == 5 and "model.onnx" in status.degraded_reason
    assert status.dimension == 384  # from the index manifest


def test_indexing_needs_the_model_and_says_how_to_get_it(workspace, tmp_path):
    ws = reopen_without_model(workspace, tmp_path / "no-model")
    with pytest.raises(ModelNotFoundError, match="rag-lsp model install"):
        ws.index()
    with pytest.raises(ModelNotFoundError):
        ws.update(["src/http/client.py"])
    assert ws.search("redirects").results  # the index is untouched


def test_unloadable_model_file_degrades_too(workspace, tmp_path, model_files):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not an onnx graph")
    shutil.copyfile(model_files.tokenizer_path, broken / "tokenizer.json")
    ws = reopen_without_model(workspace, broken)
    assert isinstance(ws.model_error, ModelIntegrityError)
    assert "onnxruntime cannot load" in str(ws.model_error)
    assert ws.search("password hashing").mode == "lexical"


def test_a_garbage_tokenizer_degrades_with_the_fix_not_a_traceback(workspace, tmp_path,
                                                                   model_files):
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copyfile(model_files.onnx_path, broken / "model.onnx")
    (broken / "tokenizer.json").write_text("garbage{", encoding="utf-8")
    ws = reopen_without_model(workspace, broken)
    assert isinstance(ws.model_error, ModelIntegrityError)
    assert "tokenizer file" in str(ws.model_error) and "rag-lsp model install" in str(
        ws.model_error)
    assert ws.search("password hashing").mode == "lexical"


def test_no_index_and_no_model_is_one_clear_error(sample_root, tmp_path):
    ws = Workspace.open(sample_root, Settings.from_dict({"modelDir": str(tmp_path / "none")}))
    with pytest.raises(ModelNotFoundError, match="rag-lsp model install"):
        ws.search("anything")


def test_warm_up_never_raises(workspace, monkeypatch, caplog):
    """Warm-up is optional work on a pool thread: a fault is logged, and the search that
    meets it later reports it."""
    def broken() -> None:
        raise RuntimeError("session could not be made")

    monkeypatch.setattr(workspace.embedder, "warm_up", broken)
    workspace.warm_up()
    assert "warm-up failed" in caplog.text and "session could not be made" in caplog.text
