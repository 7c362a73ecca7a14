"""Shared fixtures. Tests use the real model files: run `make setup` first."""

from __future__ import annotations

import pytest

from rag_lsp.embedding.model_files import find_model
from rag_lsp.embedding.tokenizer import ModelTokenCounter


@pytest.fixture(scope="session")
def model_files():
    return find_model()


@pytest.fixture(scope="session")
def token_counter(model_files) -> ModelTokenCounter:
    return ModelTokenCounter(model_files.tokenizer_path)
