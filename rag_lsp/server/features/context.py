"""``rag/injectContext``: context for an assistant mode, packed into the editor's budget."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rag_lsp.context.builder import (
    BadContextRequest,
    ContextRequest,
    ManualRef,
    Source,
    build_context,
)
from rag_lsp.context.packing import ContextItem
from rag_lsp.server.errors import bad_input, rag_request
from rag_lsp.server.features.knowledge import lines_of
from rag_lsp.server.features.search import lsp_range
from rag_lsp.server.folders import FolderIndex, path_to_uri, uri_to_path
from rag_lsp.server.methods import RAG_INJECT_CONTEXT
from rag_lsp.server.protocol import parse_params

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState


def wire_item(item: ContextItem, folders: Sequence[FolderIndex]) -> dict:
    folder = next((f for f in folders if f.root == item.root), None)
    data: dict[str, Any] = {
        "source": item.source,
        "uri": ((folder.uri_of(item.path) if folder else path_to_uri(item.root / item.path))
                if item.root and item.path else None),
        "path": item.path,
        "range": (lsp_range(item.start_line, item.end_line)
                  if item.start_line is not None else None),
        "title": item.title,
        "score": item.score,
        "tokens": item.tokens,
    }
    if item.entry_id is not None:
        data["id"] = item.entry_id
        data["createdAt"] = item.created_at
    return data


def _request(args: dict) -> ContextRequest:
    request = ContextRequest(
        mode=args["mode"], token_budget=args["tokenBudget"], query=args.get("query"),
        include_knowledge=args.get("includeKnowledge", True),
    )
    if "activeFile" in args:
        request.active_file = uri_to_path(args["activeFile"]["uri"])
        if "selection" in args["activeFile"]:
            request.selection = lines_of(args["activeFile"]["selection"],
                                         "$.activeFile.selection")
    for position, ref in enumerate(args.get("manualContext", [])):
        uri, lsp = (ref, None) if isinstance(ref, str) else (ref["uri"], ref.get("range"))
        start, end = (lines_of(lsp, f"$.manualContext[{position}].range") if lsp
                      else (None, None))
        request.manual.append(ManualRef(uri_to_path(uri), start, end))
    return request


def register(server: ServerState) -> None:
    @rag_request(server, RAG_INJECT_CONTEXT)
    async def inject_context(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_INJECT_CONTEXT, params)
        await ls.open_folders()  # start-up done: folder settings may add modes
        args["mode"] = ls.check_mode(args["mode"])
        request = _request(args)
        if not (request.query or "").strip() and request.active_file is None:
            if not request.manual:
                raise bad_input(
                    f"invalid params for {RAG_INJECT_CONTEXT}: $.query: required when there "
                    "is no activeFile or manualContext")
        folders = await ls.open_folders()
        counter = next((f.workspace.token_counter for f in folders
                        if f.workspace.token_counter is not None), None)
        if counter is None:
            raise ls.request_error(
                "context needs the embedding model's tokenizer to count tokens: "
                + ls.degraded_message())
        sources = [Source(f.workspace, f.workspace.knowledge) for f in folders]
        try:
            with ls.priority.searching():  # as rag/search: indexing pauses meanwhile
                result = await asyncio.get_running_loop().run_in_executor(
                    ls.search_pool, build_context, sources, request, counter)
        except BadContextRequest as exc:
            raise bad_input(f"invalid params for {RAG_INJECT_CONTEXT}: {exc}") from exc
        return {
            "context": result.context,
            "items": [wire_item(i, folders) for i in result.items],
            "totalTokens": result.total_tokens,
            "budget": result.budget,
            "dropped": [{**wire_item(d.item, folders), "reason": d.reason}
                        for d in result.dropped],
            "query": result.query,
        }
