"""``rag-lsp search --batch FILE``: many queries, one model load, one JSON line each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rag_lsp.errors import RagLspError
from rag_lsp.search.results import SearchFilters
from rag_lsp.workspace import Workspace


def read_queries(path: Path) -> list[tuple[object, str | None, str | None]]:
    """(id, query, problem) per non-blank line; a bad line carries a problem, not a crash."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RagLspError(f"cannot read batch file {path}: {exc.strerror}") from exc
    items: list[tuple[object, str | None, str | None]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            items.append((None, None, f"{path}:{number}: not JSON ({exc.msg})"))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("query"), str):
            got = item.get("id") if isinstance(item, dict) else None
            items.append((got, None, f'{path}:{number}: expected {{"id": ..., "query": "text"}}'))
            continue
        items.append((item.get("id"), item["query"], None))
    return items


def run_batch(ws: Workspace, path: Path, filters: SearchFilters) -> int:
    """Prints ``{"id", "results"}`` (or ``{"id", "error"}``) per query; exit 1 if any failed."""
    failed = False
    for query_id, query, problem in read_queries(path):
        if problem is None:
            try:
                response = ws.search(query, filters=filters)
                line = {"id": query_id, "results": [r.to_dict() for r in response.results]}
            except RagLspError as exc:
                problem = str(exc)
        if problem is not None:
            failed = True
            line = {"id": query_id, "error": problem}
        sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 1 if failed else 0
