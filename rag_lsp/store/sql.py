"""Building LanceDB filter expressions safely: every value is quoted (paths contain quotes)."""

from __future__ import annotations

from collections.abc import Iterable


def quote(value: str) -> str:
    """A SQL string literal; single quotes are doubled."""
    return "'" + value.replace("'", "''") + "'"


def in_list(column: str, values: Iterable[str]) -> str:
    """``column IN ('a', 'b')``; an empty list gives a filter that matches nothing."""
    quoted = [quote(v) for v in values]
    if not quoted:
        return "false"
    return f"{column} IN ({', '.join(quoted)})"


def all_of(*clauses: str | None) -> str | None:
    parts = [f"({c})" for c in clauses if c]
    return " AND ".join(parts) or None
