"""Custom request params and results checked against ``schemas/protocol/*.json``.

pygls hands custom params over raw (JSON objects as dicts); each handler validates them here, so
a malformed request gets JSON-RPC ``-32602`` with a message naming the field (``$.query:
required``) instead of a traceback or no reply at all.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams

from rag_lsp.schema_messages import (
    schema_problems,
    validator_class,
    without_lone_surrogates,
)

if TYPE_CHECKING:  # ~50 ms of imports: loaded by the first request, after `initialize`
    from jsonschema import Draft202012Validator
    from referencing import Registry

PROTOCOL_DIR = Path(__file__).resolve().parents[2] / "schemas" / "protocol"


@cache
def protocol_schemas() -> dict[str, dict[str, Any]]:
    """Each method's schema document, by method name."""
    documents = [json.loads(p.read_text(encoding="utf-8"))
                 for p in sorted(PROTOCOL_DIR.glob("*.json"))]
    return {doc["x-method"]: doc for doc in documents}


@cache
def _registry() -> Registry:
    from referencing import Registry, Resource

    resources = [(doc["$id"], Resource.from_contents(doc)) for doc in protocol_schemas().values()]
    return Registry().with_resources(resources)


@cache
def _validator(method: str, part: str) -> Draft202012Validator:
    document = protocol_schemas()[method]
    return validator_class()(
        {"$ref": f"{document['$id']}#/$defs/{part}"}, registry=_registry()
    )


def problems(method: str, part: str, value: Any) -> list[str]:
    """Readable problems with ``value`` as ``method``'s ``params`` or ``result``."""
    return schema_problems(_validator(method, part), value)


def parse_params(method: str, params: Any) -> dict[str, Any]:
    """``params`` as a plain dict, or ``JsonRpcInvalidParams`` listing every problem."""
    # pygls may hand over attrs-like objects for some shapes; normalise to plain JSON values.
    params = without_lone_surrogates(_plain(params))
    found = problems(method, "params", params)
    if found:
        raise JsonRpcInvalidParams(f"invalid params for {method}: " + "; ".join(found))
    return params or {}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "_asdict"):  # pygls' namedtuple-style objects (before tuple!)
        return _plain(value._asdict())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
