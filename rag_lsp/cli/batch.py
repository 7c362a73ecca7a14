"""``rag-lsp search --batch FILE``: many queries, one model load, one JSON line each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rag_lsp.cli.console import print_styled
from rag_lsp.errors import RagLspError
from rag_lsp.schema_messages import without_lone_surrogates
from rag_lsp.search.filter_check import normalised
from rag_lsp.search.results import SearchFilters
from rag_lsp.workspace import Workspace


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not JSON")  # Python's json reads NaN; JSON has none


def _read_text(path: Path) -> str:
    """The batch file's text; ``-`` is stdin."""
    try:
        if str(path) == "-":
            return sys.stdin.buffer.read().decode("utf-8")
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RagLspError(f"cannot read batch file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise RagLspError(f"batch file {path} is not UTF-8 text (byte {exc.start}): write it "
                          "as UTF-8 JSON lines") from exc


def read_queries(path: Path) -> list[tuple[int, object, str | None, str | None]]:
    """(line number, id, query, problem) per non-blank line; a bad line carries a problem,
    not a crash."""
    items: list[tuple[int, object, str | None, str | None]] = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line, parse_constant=_not_json)
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            items.append((number, None, None, f"{path}:{number}: not JSON ({reason})"))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("query"), str):
            got = item.get("id") if isinstance(item, dict) else None
            items.append((number, got, None,
                          f'{path}:{number}: expected {{"id": ..., "query": "text"}}'))
            continue
        items.append((number, item.get("id"), without_lone_surrogates(item["query"]), None))
    return items


def run_batch(ws: Workspace, path: Path, filters: SearchFilters) -> int:
    """Prints ``{"id", "results"}`` (or ``{"id", "error"}``) per query; exit 1 if any failed.
    Filters that cannot match are refused before the first line (not once per line), and a
    warning (filters that match no file) goes to stderr once."""
    filters = normalised(filters, ws.root)
    failed = False
    warned: set[str] = set()
    for number, query_id, query, problem in read_queries(path):
        if problem is None:
            try:
                response = ws.search(query, filters=filters)
                line = {"id": query_id, "results": [r.to_dict() for r in response.results]}
                for warning in response.warnings:
                    if warning not in warned:
                        warned.add(warning)
                        print_styled("warning:", "yellow", warning)
            except RagLspError as exc:
                problem = f"{path}:{number}: {exc}"
        if problem is not None:
            failed = True
            line = {"id": query_id, "error": problem}
        sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 1 if failed else 0
