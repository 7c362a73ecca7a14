"""``rag/search`` and ``rag/status``: answers from whatever is indexed, never waiting for
indexing to finish."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any

from rag_lsp.errors import IndexCorruptError, RagLspError
from rag_lsp.search.results import LineRange, SearchFilters, SearchResponse, SearchResult
from rag_lsp.server.errors import rag_request
from rag_lsp.server.folders import FolderIndex
from rag_lsp.server.methods import RAG_SEARCH, RAG_STATUS
from rag_lsp.server.protocol import parse_params
from rag_lsp.store.manifest import without_rebuild_hint

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState


def lsp_range(start_line: int, end_line: int) -> dict:
    """1-based inclusive lines → an LSP range: 0-based, ending at the start of the next line
    (the spec's way to cover whole lines, line ending included)."""
    return {"start": {"line": start_line - 1, "character": 0},
            "end": {"line": end_line, "character": 0}}


def wire_result(folder: FolderIndex, result: SearchResult) -> dict:
    return {
        "uri": folder.uri_of(result.path),
        "path": result.path,
        "folder": folder.uri,
        "range": lsp_range(result.start_line, result.end_line),
        "ranges": [_wire_range(r) for r in result.ranges],
        "score": result.score,
        "kind": result.kind,
        "symbol": result.symbol,
        "language": result.language,
        "snippet": result.snippet,
    }


def _wire_range(line_range: LineRange) -> dict:
    return {"range": lsp_range(line_range.start_line, line_range.end_line),
            "score": line_range.score, "symbol": line_range.symbol, "kind": line_range.kind,
            "preview": line_range.preview}


def _filters(raw: dict) -> SearchFilters:
    return SearchFilters(
        paths=tuple(raw.get("paths", ())),
        languages=tuple(raw.get("languages", ())),
        kinds=tuple(raw.get("kinds", ())),
    )


async def search(server: ServerState, args: dict) -> dict:
    started = time.perf_counter()
    folders = list(server.folders.values())
    cancelled = threading.Event()
    warnings: list[str] = []
    if not server.started:
        warnings.append("the server is still starting; no folder is indexed yet")
    elif not folders:
        warnings.append("no workspace folder is open")

    def search_folder(folder: FolderIndex) -> SearchResponse | None:
        if cancelled.is_set() or not folder.workspace.has_index():
            return None
        return folder.workspace.search(
            args["query"],
            top_k=args.get("topK"),
            threshold=args.get("threshold"),
            mode=args.get("mode"),
            filters=_filters(args.get("filters", {})),
        )

    loop = asyncio.get_running_loop()
    try:
        answers = await asyncio.gather(
            *(loop.run_in_executor(server.search_pool, search_folder, f) for f in folders),
            return_exceptions=True,
        )
    except asyncio.CancelledError:
        cancelled.set()  # $/cancelRequest: folders not yet searched are skipped
        raise
    results: list[tuple[FolderIndex, SearchResult]] = []
    slowest: SearchResponse | None = None  # its timings are the answer's
    modes: set[str] = set()
    failures: list[str] = []
    errors: list[RagLspError] = []
    for folder, answer in zip(folders, answers, strict=True):
        if isinstance(answer, IndexCorruptError) and not folder.running:
            server.indexing.start_run(folder)  # the run rebuilds a damaged index by itself
            damage = without_rebuild_hint(str(answer))
            answer = IndexCorruptError(f"{damage} It is being rebuilt from the workspace "
                                       "now; search again when the folder is ready.")
        if isinstance(answer, RagLspError):
            errors.append(answer)
            failures.append(f"{folder.root}: {answer}")
        elif isinstance(answer, BaseException):
            raise answer
        elif answer is not None:
            if slowest is None or answer.took_ms > slowest.took_ms:
                slowest = answer
            modes.add(answer.mode)
            warnings.extend(w for w in answer.warnings if w not in warnings)
            results.extend((folder, r) for r in answer.results)
    if failures and len(failures) == len(folders):
        if len({type(e) for e in errors}) == 1:
            raise errors[0]  # one kind of failure: the client gets its kind and code
        raise server.request_error("search failed: " + "; ".join(failures))
    warnings.extend(failures)
    if len(folders) > 1:  # one folder keeps the engine's (fused) order
        results.sort(key=lambda pair: pair[1].score, reverse=True)
    top_k = args.get("topK") or server.settings.top_k
    mode = modes.pop() if len(modes) == 1 else args.get("mode", server.settings.search_mode)
    if server.embedder is None:
        mode = "lexical"
    timings = ({} if slowest is None else
               {"timings": {"engineMs": round(slowest.took_ms, 2), **slowest.timings.to_wire()}})
    return {
        "results": [wire_result(f, r) for f, r in results[:top_k]],
        "tookMs": round((time.perf_counter() - started) * 1000, 2),
        # A full rebuild made beside the index leaves the whole current index answering.
        "partial": not server.started or any(f.running and not f.jobs.beside
                                             for f in folders),
        "mode": mode,
        "warnings": warnings,
        **timings,
    }


def register(server: ServerState) -> None:
    @rag_request(server, RAG_SEARCH)
    async def rag_search(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_SEARCH, params)
        ls.require_enabled()
        # Indexing pauses from here, not only while the engine searches: its Python work
        # would otherwise hold the interpreter each hand-over between the server's threads
        # waits for.
        with ls.priority.searching():
            return await search(ls, args)

    @rag_request(server, RAG_STATUS)
    async def rag_status(ls: ServerState, params: Any) -> dict:
        parse_params(RAG_STATUS, params)
        for folder in list(ls.folders.values()):
            await ls.indexing.refresh_counts(folder)
        return ls.status()
