"""The protocol schemas, the method constants and the params validation agree."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator
from pygls.exceptions import JsonRpcInvalidParams

from rag_lsp.server import methods
from rag_lsp.server.features.search import lsp_range
from rag_lsp.server.protocol import PROTOCOL_DIR, parse_params, problems, protocol_schemas


def test_every_method_constant_has_a_schema_and_every_schema_a_constant():
    documented = {doc["x-method"]: doc["x-kind"] for doc in protocol_schemas().values()}
    assert documented == {
        **{m: "request" for m in methods.REQUESTS},
        **{m: "notification" for m in methods.NOTIFICATIONS},
    }
    for path in PROTOCOL_DIR.glob("*.json"):
        assert path.stem == protocol_schemas()[path.stem.replace(".", "/", 1)]["$id"].rsplit(
            "/", 1)[1].removesuffix(".json")


@pytest.mark.parametrize("method", sorted(protocol_schemas()))
def test_schemas_are_valid_json_schema(method):
    Draft202012Validator.check_schema(protocol_schemas()[method])


@pytest.mark.parametrize(("params", "expected"), [
    ({}, ["$.query: required"]),
    (None, ["$ = null: must be an object"]),
    ({"query": "   "}, ["$.query = '   ': must contain some words to look for"]),
    ({"query": "x", "topK": 0}, ["$.topK = 0: must be at least 1"]),
    ({"query": "x", "topK": 1.5}, ["$.topK = 1.5: must be an integer"]),
    ({"query": "x", "mode": "fuzzy"},
     ["$.mode = 'fuzzy': must be one of 'vector', 'lexical', 'hybrid'"]),
    ({"query": "x", "filters": {"paths": ["ok", ""]}},
     ["$.filters.paths[1] = '': must not be empty"]),
    ({"query": "x", "limit": 3},
     ["$.limit: unknown field (known: filters, mode, query, threshold, topK)"]),
])
def test_search_params_problems_name_the_field(params, expected):
    assert problems(methods.RAG_SEARCH, "params", params) == expected
    with pytest.raises(JsonRpcInvalidParams) as error:
        parse_params(methods.RAG_SEARCH, params)
    assert error.value.code == -32602 and expected[0] in error.value.message


def test_valid_params_pass_through():
    params = {"query": "x", "topK": 3, "filters": {"kinds": ["function"]}}
    assert parse_params(methods.RAG_SEARCH, params) == params
    assert parse_params(methods.RAG_STATUS, None) == {}
    assert parse_params(methods.RAG_REINDEX, {"full": True}) == {"full": True}


def test_lsp_ranges_are_zero_based_and_cover_whole_lines():
    assert lsp_range(1, 3) == {"start": {"line": 0, "character": 0},
                               "end": {"line": 3, "character": 0}}
