"""The tools agents call: their catalogue (``schemas/agent-tools.json``), argument checks, and
what each does with the workspace a :class:`WorkspaceKeeper` keeps current.

Nothing here knows MCP: :mod:`rag_lsp.agents.mcp_server` puts these on the wire. Every tool
returns a :class:`ToolAnswer` — text for the agent, and whether it is an error the agent can
fix (a bad argument, an unknown mode) so it retries differently.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from rag_lsp.agents.answers import context_answer, entry_text, location, search_answer
from rag_lsp.agents.keeper import WorkspaceKeeper
from rag_lsp.confined import resolved
from rag_lsp.context.modes import unknown_mode_message
from rag_lsp.context.packing import SAFETY_MARGIN
from rag_lsp.errors import BadInputError, RagLspError
from rag_lsp.knowledge.anchors import read_lines, relative_path
from rag_lsp.knowledge.entries import AnchorSpec
from rag_lsp.schema_messages import (
    schema_problems,
    validator_class,
    without_lone_surrogates,
)
from rag_lsp.search.results import SearchFilters

TOOLS_PATH = Path(__file__).resolve().parents[2] / "schemas" / "agent-tools.json"
# On a first index, a search waits this long for the first batch to land rather than answer
# "nothing yet" (a small workspace is indexed by then); then it answers from what exists.
FIRST_RESULTS_WAIT_SECONDS = 3.0
# Packings of a context answer at most: each takes less than the one before.
MAX_REPACKS = 3


@dataclass
class ToolAnswer:
    text: str
    is_error: bool = False


@cache
def tool_catalogue() -> dict[str, dict[str, Any]]:
    """Tool name → its entry in ``schemas/agent-tools.json`` (title, description, schema)."""
    tools = json.loads(TOOLS_PATH.read_text(encoding="utf-8"))["tools"]
    return {tool["name"]: tool for tool in tools}


@cache
def _validator(name: str) -> Draft202012Validator:
    return validator_class()(tool_catalogue()[name]["inputSchema"])


def _with_defaults(name: str, arguments: dict) -> dict:
    properties = tool_catalogue()[name]["inputSchema"].get("properties", {})
    return {**{k: p["default"] for k, p in properties.items() if "default" in p}, **arguments}


class WorkspaceTools:
    """Each tool as a method taking its checked arguments; :meth:`call` dispatches."""

    def __init__(self, keeper: WorkspaceKeeper):
        self.keeper = keeper
        self._tools: dict[str, Callable[[dict], ToolAnswer]] = {
            "search_code": self.search_code, "get_context": self.get_context,
            "kb_add": self.kb_add, "kb_search": self.kb_search, "kb_list": self.kb_list,
            "index_status": self.index_status,
        }

    def call(self, name: str, arguments: dict | None) -> ToolAnswer:
        """Run tool ``name``; bad arguments and engine errors come back as error answers
        saying what to change, never as exceptions."""
        if name not in self._tools:
            return ToolAnswer(f"unknown tool {name!r}; the tools are "
                              + ", ".join(sorted(self._tools)), is_error=True)
        arguments = without_lone_surrogates(arguments or {})
        problems = schema_problems(_validator(name), arguments)
        if problems:
            return ToolAnswer(f"invalid arguments for {name}: " + "; ".join(problems),
                              is_error=True)
        try:
            return self._tools[name](_with_defaults(name, arguments))
        except RagLspError as exc:
            return ToolAnswer(f"{name} failed: {exc}", is_error=True)

    # ---- code ------------------------------------------------------------------------

    def _building_note(self) -> str:
        status = self.keeper.status()
        if not status.building:
            return ""
        progress = status.progress
        done = (f" ({progress.files_done} of {progress.files_total} files so far)"
                if progress and progress.files_total else "")
        if self.keeper.had_index:  # a restart: checking for changes made while it was off
            return (f"Note: the index is being brought up to date{done}; files changed since "
                    "the last run may not show yet.")
        drafted = self.keeper.workspace().drafted_files()
        by_words = (f" {drafted} files are matched by their words only until the model has "
                    "read them." if drafted else "")
        return (f"Note: the index is still being built{done}; results may be incomplete."
                f"{by_words} Search again later for the full picture.")

    def search_code(self, args: dict) -> ToolAnswer:
        ws = self.keeper.workspace()
        if not self.keeper.wait_searchable(FIRST_RESULTS_WAIT_SECONDS):
            return ToolAnswer(self._not_searchable_yet())
        note = self._building_note()
        response = ws.search(
            args["query"], top_k=args["top_k"],
            filters=SearchFilters(paths=tuple(args.get("paths", ())),
                                  languages=tuple(args.get("languages", ())),
                                  kinds=tuple(args.get("kinds", ()))))
        return ToolAnswer(search_answer(response, max_tokens=args["max_tokens"],
                                        snippet_lines=args["snippet_lines"],
                                        notes=[note] if note else []))

    def _not_searchable_yet(self) -> str:
        status = self.keeper.status()
        if status.building:
            return (f"The index of {self.keeper.root} is being built ({status.message}); "
                    "nothing is searchable yet. Try again in a few seconds; index_status "
                    "shows the progress.")
        raise RagLspError(f"there is no index of {self.keeper.root}: {status.message}")

    def get_context(self, args: dict) -> ToolAnswer:
        from rag_lsp.context.builder import ContextRequest, Source, build_context

        ws = self.keeper.workspace()
        self._check_mode(ws, args["mode"])
        if ws.token_counter is None:
            raise RagLspError(f"context needs the model's tokenizer: {ws.model_error}")
        if not self.keeper.wait_searchable(FIRST_RESULTS_WAIT_SECONDS):
            return ToolAnswer(self._not_searchable_yet())
        budget = args["token_budget"]
        request = ContextRequest(mode=args["mode"], token_budget=budget, query=args["query"],
                                 include_knowledge=args["include_knowledge"])
        sources = [Source(ws, ws.knowledge)]
        result = build_context(sources, request, ws.token_counter)
        answer = context_answer(result, args["mode"], args["query"],
                                note=self._building_note(), budget=budget)
        # The whole answer is the agent's to read, its first lines too: packed again into
        # less while they take it over the budget. The packer fills only 1 - SAFETY_MARGIN
        # of what it is given, so it is given what the context may take, scaled up.
        for _ in range(MAX_REPACKS):
            over = ws.token_counter.count(answer) - budget
            if over <= 0 or not result.items:
                break
            may_take = result.total_tokens - over
            request.token_budget = max(1, int(may_take / (1 - SAFETY_MARGIN)))
            result = build_context(sources, request, ws.token_counter)
            answer = context_answer(result, args["mode"], args["query"],
                                    note=self._building_note(), budget=budget)
        return ToolAnswer(answer)

    # ---- knowledge -------------------------------------------------------------------

    @staticmethod
    def _check_mode(ws, mode: str) -> None:
        problem = unknown_mode_message(mode, ws.settings.extra_modes)
        if problem:
            raise BadInputError(f"$.mode = {mode!r}: {problem}")

    def kb_add(self, args: dict) -> ToolAnswer:
        ws = self.keeper.workspace()
        self._check_mode(ws, args["mode"])
        anchors = [self._anchor(ws.root, position, a)
                   for position, a in enumerate(args.get("anchors", []))]
        entry = ws.knowledge.add(args["mode"], args["content"], title=args.get("title", ""),
                                 tags=args.get("tags", ()), anchors=anchors)
        about = ", ".join(location(a.path, a.start_line, a.end_line) for a in entry.anchors)
        return ToolAnswer(f"Saved {args['mode']} finding {entry.id} ({entry.created_at})"
                          + (f" about {about}" if about else "") + ".")

    @staticmethod
    def _anchor(root: Path, position: int, raw: dict) -> AnchorSpec:
        try:
            rel = relative_path(root, raw["path"])
        except BadInputError as exc:
            raise BadInputError(f"$.anchors[{position}].path: {exc}") from exc
        start = raw.get("start_line")
        end = raw.get("end_line")
        if start is None and end is not None:  # up to end_line
            start = 1
        if start is None:  # the whole file, its lines counted as the anchor counts them
            resolved(root / rel, f"$.anchors[{position}].path")  # a loop of links named
            try:
                start, end = 1, max(1, len(read_lines(root, rel)))
            except OSError as exc:  # missing, outside through a link, a FIFO, a folder…
                raise BadInputError(f"$.anchors[{position}].path = {raw['path']!r}: no such "
                                    "file in the workspace") from exc
        elif end is None:
            end = start
        if end < start:
            raise BadInputError(f"$.anchors[{position}]: end_line {end} is before start_line "
                                f"{start}")
        return AnchorSpec(rel, start, end)

    def kb_search(self, args: dict) -> ToolAnswer:
        ws = self.keeper.workspace()
        self._check_mode(ws, args["mode"])
        entries = ws.knowledge.search(args["mode"], args["query"], top_k=args["top_k"],
                                      threshold=ws.settings.knowledge_threshold)
        if not entries:
            return ToolAnswer(f"No {args['mode']} findings relevant to {args['query']!r}.")
        return ToolAnswer("\n\n".join([f"{len(entries)} {args['mode']} finding(s), best first:",
                                       *(entry_text(e) for e in entries)]))

    def kb_list(self, args: dict) -> ToolAnswer:
        ws = self.keeper.workspace()
        self._check_mode(ws, args["mode"])
        entries, total = ws.knowledge.list(args["mode"], limit=args["limit"],
                                           offset=args["offset"])
        if not entries:
            return ToolAnswer(f"No {args['mode']} findings"
                              + (f" past offset {args['offset']} (of {total})."
                                 if total else " yet."))
        first = args["offset"] + 1
        return ToolAnswer("\n\n".join(
            [f"{args['mode']} findings {first}-{first + len(entries) - 1} of {total}, "
             "newest first:", *(entry_text(e) for e in entries)]))

    # ---- status ----------------------------------------------------------------------

    def index_status(self, args: dict) -> ToolAnswer:
        status = self.keeper.status()
        lines = [f"Workspace {self.keeper.root}: {status.phase}"
                 + (f" ({status.message})" if status.message else "")]
        if status.progress is not None and status.progress.files_total:
            lines.append(f"Indexing: {status.progress.percentage()}% "
                         f"({status.progress.describe()})")
        if not self.keeper.opened:
            return ToolAnswer("\n".join(lines))  # the model is loading: nothing more to say
        try:
            ws = self.keeper.workspace()
        except RagLspError as exc:
            lines.append(str(exc))
            return ToolAnswer("\n".join(lines))
        if ws.has_index():
            info = ws.status()
            lines.append(f"Indexed: {info.files:,} files, {info.chunks:,} chunks; last indexed "
                         f"{info.last_indexed_at or 'never'}")
        else:
            lines.append("Indexed: nothing yet")
        lines.append("Search: " + ("semantic + lexical" if not ws.degraded
                                   else f"lexical only ({ws.model_error})"))
        lines.append(f"Index folder: {ws.index_dir}")
        return ToolAnswer("\n".join(lines))

