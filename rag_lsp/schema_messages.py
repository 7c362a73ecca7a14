"""JSON Schema violations in words a user can act on (shared by settings and protocol)."""

from __future__ import annotations

import json
from typing import Any


def show_value(value: Any) -> str:
    """A value as the user wrote it (JSON spelling for true/false/null), kept short."""
    if value is None or isinstance(value, bool):
        text = json.dumps(value)
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


TYPE_WORDS = {
    "integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
    "array": "a list", "object": "an object", "null": "null",
}


def describe_rule(error: Any) -> str:
    """The rule a jsonschema error broke, in words."""
    kind, arg, schema = error.validator, error.validator_value, error.schema
    if kind == "maximum":
        return f"must be at most {show_value(arg)}"
    if kind == "minimum":
        return f"must be at least {show_value(arg)}"
    if kind == "enum":
        return "must be one of " + ", ".join(show_value(v) for v in arg)
    if kind == "type":
        kinds = [arg] if isinstance(arg, str) else list(arg)
        return "must be " + " or ".join(TYPE_WORDS.get(k, k) for k in kinds)
    if kind == "pattern":
        return schema.get("patternErrorMessage") or f"must match the pattern {arg!r}"
    if kind == "uniqueItems":
        seen: set[str] = set()
        for item in error.instance:
            if json.dumps(item) in seen:
                return f"must not repeat items ({show_value(item)} appears twice)"
            seen.add(json.dumps(item))
        return "must not repeat items"
    if kind == "minLength" and arg == 1:
        return "must not be empty"
    # Never jsonschema's own wording for sizes: it quotes the whole (possibly huge) value.
    if kind == "maxLength":
        return f"must be at most {arg:,} characters (got {len(error.instance):,})"
    if kind == "maxItems":
        return f"must have at most {arg:,} items (got {len(error.instance):,})"
    return error.message
