"""A chunk's ranking fields packed into one string column, for the reads that LanceDB answers.

Why: past the in-memory copy (``MATRIX_MAX_ROWS`` chunks) every search reads its candidates'
rows back from LanceDB (the nearest chunks, the full-text and the defined-name matches), and
such a read costs per column, not per byte (bench/README.md, "Where a search's CPU goes at
100k chunks"). With the nine fields a search ranks by read from one column, a search at
100k chunks took 1.9-2.9 ms less at the median and 3.4-4.8 at the p95, in process (its CPU
2.9-4.6 and 5.5-7.1 ms less; bench/packed_fields.py). The separate columns stay: filters,
the full-text indexes and the in-memory copy's load read them.

The packed value is the fields joined by U+001F, then the sum of their lengths. A null field
(which SQL's ``concat_ws`` skips) leaves too few parts, and a field that holds U+001F itself
splits into too many or fails the sum: such rows are read from the columns instead
(:func:`unpack`). An index written before the column existed gets it in one step
(:data:`PACKING_SQL`, under a second at 100k chunks, ~18 MB on disk).
"""

from __future__ import annotations

from collections.abc import Iterable

PACKED_COLUMN = "packed"
# In the packed order; the ints are start_line and end_line.
PACKED_FIELDS = ("id", "path", "start_line", "end_line", "language", "kind", "symbol",
                 "defines", "terms")
_INT_FIELDS = frozenset({"start_line", "end_line"})
_SEPARATOR = "\x1f"

# The same value as pack() gives, computed by LanceDB for the rows already written (its SQL
# has no CASE: a row with a null field packs fewer fields, which unpack() rejects).
PACKING_SQL = (f"concat_ws(chr(31), {', '.join(PACKED_FIELDS)}, "
               f"length(concat({', '.join(PACKED_FIELDS)})))")


def pack(row: dict) -> str | None:
    """``row``'s packed value (``None`` if a field is missing or null)."""
    values = [row.get(name) for name in PACKED_FIELDS]
    if any(value is None for value in values):
        return None
    texts = [str(value) for value in values]
    return _SEPARATOR.join([*texts, str(sum(map(len, texts)))])


def unpack(rows: Iterable[dict]) -> list[dict]:
    """Give each row its fields from its packed value (taken out of the row), in place; the
    rows whose value fails its check, or has none, are returned to be read from the columns
    (their fields are left unset)."""
    unread = []
    for row in rows:
        value = row.pop(PACKED_COLUMN, None)
        parts = value.split(_SEPARATOR) if value is not None else ()
        if len(parts) != len(PACKED_FIELDS) + 1 or not _checked(parts):
            unread.append(row)
            continue
        for name, part in zip(PACKED_FIELDS, parts[:-1], strict=True):
            row[name] = int(part) if name in _INT_FIELDS else part
    return unread


def _checked(parts: list[str]) -> bool:
    try:
        return sum(map(len, parts[:-1])) == int(parts[-1])
    except ValueError:
        return False
