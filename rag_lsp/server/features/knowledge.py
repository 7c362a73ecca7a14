"""``rag/kb.*``: per-mode knowledge bases, kept in each folder's index folder.

An entry is stored with the folder its first anchor is in (the first folder if it has no
anchors); searches and listings span every folder.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Any

from rag_lsp.confined import resolved
from rag_lsp.errors import RagLspError
from rag_lsp.knowledge import AnchorSpec, KnowledgeEntry, parse_time
from rag_lsp.server.errors import bad_input, rag_request
from rag_lsp.server.features.search import lsp_range
from rag_lsp.server.folders import FolderIndex, folder_of, uri_to_path
from rag_lsp.server.methods import (
    RAG_KB_ADD,
    RAG_KB_CLEAR,
    RAG_KB_DELETE,
    RAG_KB_LIST,
    RAG_KB_SEARCH,
)
from rag_lsp.server.protocol import parse_params

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState


def lines_of(lsp: dict, what: str) -> tuple[int, int]:
    """An LSP range → 1-based inclusive lines (an end at character 0 ends the line before);
    a range whose end comes before its start is refused, naming ``what``."""
    if (lsp["end"]["line"], lsp["end"]["character"]) < (lsp["start"]["line"],
                                                        lsp["start"]["character"]):
        raise bad_input(f"{what}: the range ends (line {lsp['end']['line']}) before it starts "
                        f"(line {lsp['start']['line']}); positions are 0-based, start first")
    start = lsp["start"]["line"] + 1
    end = lsp["end"]["line"] + (1 if lsp["end"]["character"] > 0 else 0)
    return start, max(start, end)


def wire_entry(folder: FolderIndex, entry: KnowledgeEntry) -> dict:
    data = entry.to_dict()
    data["anchors"] = [
        {"uri": folder.uri_of(a.path), "path": a.path,
         "range": lsp_range(a.start_line, a.end_line), "sha256": a.sha256}
        for a in entry.anchors
    ]
    return data


def _times(args: dict) -> dict:
    try:
        times = {key: parse_time(args[key]) for key in ("since", "until") if key in args}
    except RagLspError as exc:
        raise bad_input(f"$.since/$.until: {exc}") from exc
    if "since" in times and "until" in times and times["since"] > times["until"]:
        raise bad_input(
            f"$.since = {args['since']!r} is after $.until = {args['until']!r}: nothing can "
            "match; swap them")
    return times


async def _in_pool(ls: ServerState, call, *args, **kwargs):
    return await asyncio.get_running_loop().run_in_executor(
        ls.search_pool, partial(call, *args, **kwargs))


async def _anchors(ls: ServerState, raw: list[dict]) -> tuple[FolderIndex, list[AnchorSpec]]:
    folders = await ls.open_folders()
    home: FolderIndex | None = None
    specs = []
    for position, anchor in enumerate(raw):
        path = uri_to_path(anchor["uri"])
        # Resolved first (``..``, symlinks): an anchor is a file inside a folder, not a spelling.
        path = resolved(path, f"$.anchors[{position}].uri") if path else None
        folder = folder_of(ls.folders, path) if path else None
        if folder is None or (home is not None and folder is not home):
            raise bad_input(
                f"$.anchors[{position}].uri = {anchor['uri']!r}: must be a file in "
                + ("the same workspace folder as the first anchor" if folder else
                   "an open workspace folder"))
        home = folder
        specs.append(AnchorSpec(path.relative_to(folder.root.resolve()).as_posix(),
                                *lines_of(anchor["range"], f"$.anchors[{position}].range")))
    return home or folders[0], specs


def register(server: ServerState) -> None:
    @rag_request(server, RAG_KB_ADD)
    async def kb_add(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_KB_ADD, params)
        await ls.open_folders()  # start-up done: folder settings may add modes
        mode = ls.check_mode(args["mode"])
        folder, anchors = await _anchors(ls, args.get("anchors", []))
        entry = await _in_pool(
            ls, folder.workspace.knowledge.add, mode, args["content"],
            title=args.get("title", ""), tags=args.get("tags", ()),
            session_id=args.get("sessionId"), anchors=anchors)
        return {"id": entry.id, "createdAt": entry.created_at}

    @rag_request(server, RAG_KB_SEARCH)
    async def kb_search(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_KB_SEARCH, params)
        await ls.open_folders()  # start-up done: folder settings may add modes
        mode = ls.check_mode(args["mode"])
        times = _times(args)
        top_k = args.get("topK", ls.settings.top_k)
        found: list[tuple[FolderIndex, KnowledgeEntry]] = []
        for folder in await ls.open_folders():
            entries = await _in_pool(
                ls, folder.workspace.knowledge.search, mode, args["query"], top_k=top_k,
                threshold=args.get("threshold", ls.settings.knowledge_threshold), **times)
            found += [(folder, e) for e in entries]
        found.sort(key=lambda p: (round(p[1].score or 0.0, 2), p[1].created_at), reverse=True)
        return {"entries": [wire_entry(f, e) for f, e in found[:top_k]]}

    @rag_request(server, RAG_KB_LIST)
    async def kb_list(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_KB_LIST, params)
        await ls.open_folders()  # start-up done: folder settings may add modes
        mode = ls.check_mode(args["mode"])
        times = _times(args)
        limit, offset = args.get("limit", 50), args.get("offset", 0)
        listed: list[tuple[FolderIndex, KnowledgeEntry]] = []
        total = 0
        for folder in await ls.open_folders():
            page, count = await _in_pool(ls, folder.workspace.knowledge.list, mode,
                                         limit=offset + limit, offset=0, **times)
            listed += [(folder, e) for e in page]
            total += count
        listed.sort(key=lambda p: p[1].created_at, reverse=True)
        return {"entries": [wire_entry(f, e) for f, e in listed[offset:offset + limit]],
                "total": total}

    @rag_request(server, RAG_KB_DELETE)
    async def kb_delete(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_KB_DELETE, params)
        await ls.open_folders()  # start-up done: folder settings may add modes
        mode = ls.check_mode(args["mode"])
        for folder in await ls.open_folders():
            if await _in_pool(ls, folder.workspace.knowledge.delete, mode, args["id"]):
                return {"removed": 1}
        return {"removed": 0}

    @rag_request(server, RAG_KB_CLEAR)
    async def kb_clear(ls: ServerState, params: Any) -> dict:
        args = parse_params(RAG_KB_CLEAR, params)
        await ls.open_folders()  # start-up done: folder settings may add modes
        mode = ls.check_mode(args["mode"])
        removed = 0
        for folder in await ls.open_folders():
            removed += await _in_pool(ls, folder.workspace.knowledge.clear, mode)
        return {"removed": removed}
