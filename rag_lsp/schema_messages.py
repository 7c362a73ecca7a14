"""JSON Schema violations in words a user can act on (shared by settings and protocol)."""

from __future__ import annotations

import json
import math
import re
from functools import cache
from typing import Any

# In a Python string every surrogate code point is a lone one (a pair decodes to one
# character): JSON's "\ud800" escape gives one, and the tokenizer and the table both refuse it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """``value`` (decoded JSON) with each lone surrogate in its strings replaced by U+FFFD,
    as a UTF-8 decoder replaces a byte it cannot read."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {key: without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value


@cache
def validator_class() -> Any:
    """Draft 2020-12, but a whole float (``5.0``) is not an integer and NaN is not a number.

    The standard counts ``5.0`` as an integer, and Python's json reads ``NaN``; both then
    reached code that slices by a count or compares with a bound (a TypeError, an internal
    error). Refused here, the caller gets the field and the rule instead. Imported when
    first used (jsonschema costs ~50 ms, not before a server's first answer)."""
    from jsonschema import Draft202012Validator, validators

    def integer(_checker: Any, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def number(_checker: Any, value: Any) -> bool:
        return integer(_checker, value) or (isinstance(value, float) and not math.isnan(value))

    checker = Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": integer, "number": number})
    return validators.extend(Draft202012Validator, type_checker=checker)


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


def json_path(path: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def schema_problems(validator: Any, value: Any) -> list[str]:
    """Every way ``value`` breaks ``validator``'s schema, one readable line each."""
    found = []
    for error in sorted(validator.iter_errors(value),
                        key=lambda e: [str(p) for p in e.absolute_path]):
        # "not valid under any of the given schemas" says nothing: explain the closest branch.
        while error.validator in ("oneOf", "anyOf") and error.context:
            error = _closest_branch(error.context)
        where = list(error.absolute_path)
        if error.validator == "required":
            missing = error.message.split("'")[1]
            found.append(f"{json_path([*where, missing])}: required")
        elif error.validator == "additionalProperties":
            allowed = sorted(error.schema.get("properties", {}))
            extra = sorted(set(error.instance) - set(allowed))
            known = f"known: {', '.join(allowed)}" if allowed else "it takes no fields"
            found += [f"{json_path([*where, key])}: unknown field ({known})" for key in extra]
        else:
            found.append(f"{json_path(where)} = {show_value(error.instance)}: "
                         f"{describe_rule(error)}")
    return found


def _closest_branch(errors: list[Any]) -> Any:
    """The alternative the value was most likely meant to match: not one whose very type is
    wrong, and the one that got deepest into the value."""
    return min(errors, key=lambda e: (e.validator == "type" and not e.relative_path,
                                      -len(e.relative_path)))
