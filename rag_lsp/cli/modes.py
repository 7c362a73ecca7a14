"""``rag-lsp context`` and ``rag-lsp kb``: mode context and knowledge bases from a terminal."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lsp.cli.console import print_dim
from rag_lsp.confined import resolved
from rag_lsp.context.modes import BUILTIN_MODES, unknown_mode_message
from rag_lsp.errors import RagLspError
from rag_lsp.knowledge.entries import AnchorSpec, KnowledgeEntry, parse_time

if TYPE_CHECKING:  # the engine loads when a command runs, not to print --help
    from rag_lsp.workspace import Workspace

EXIT_OK = 0
LINES = re.compile(r"(?P<path>.+?)(?::L?(?P<start>\d+)(?:-L?(?P<end>\d+))?)?\Z", re.DOTALL)
MODE_HELP = f"{', '.join(BUILTIN_MODES)}, or a mode named in the extraModes setting"


def _path_and_lines(spec: str, flag: str) -> tuple[str, int | None, int | None]:
    """``PATH``, ``PATH:12`` or ``PATH:12-30`` (an ``L`` before numbers is accepted), as
    given to ``flag``."""
    match = LINES.fullmatch(spec)
    if not match:
        raise RagLspError(f"{flag} {spec!r}: expected PATH, PATH:LINE or PATH:START-END")
    start = int(match["start"]) if match["start"] else None
    end = int(match["end"]) if match["end"] else start
    if start is not None and not 1 <= start <= end:
        raise RagLspError(f"{flag} {spec!r}: lines are numbered from 1 and the range must not "
                          "end before it starts")
    return match["path"], start, end


def _int_from(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``low`` (argparse names the flag)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low} (got {value})")
        return value
    return parse


def _cosine(text: str) -> float:
    """An argparse type: a cosine similarity, -1 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not -1 <= value <= 1:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"must be a number from -1 to 1 (got {text})")
    return value


def add_parsers(commands: argparse._SubParsersAction,
                add_workspace_options: Callable[[argparse.ArgumentParser], None]) -> None:
    context = commands.add_parser(
        "context", help="pack context for an assistant mode into a token budget",
        description="Print the context an assistant mode would get: manual context first "
        "(--manual), then the mode's knowledge, then code relevant to QUERY, as Markdown that "
        "fits the budget (counted with the model's tokenizer, 10% kept free).",
    )
    context.add_argument("query", nargs="?", help="what the assistant is asked about "
                         "(default: derived from --file)")
    context.add_argument("--mode", required=True, help=MODE_HELP)
    context.add_argument("--budget", type=_int_from(1), default=2000,
                         help="token budget (default 2000)")
    context.add_argument("--file", metavar="PATH[:START-END]",
                         help="the active file (and selected lines)")
    context.add_argument("--manual", action="append", default=[], metavar="PATH[:START-END]",
                         help="include this file or range first (repeatable)")
    context.add_argument("--no-knowledge", action="store_true",
                         help="leave the mode's knowledge base out")
    context.add_argument("--root", default=".", help="workspace folder (default: .)")
    add_workspace_options(context)

    kb = commands.add_parser("kb", help="per-mode knowledge bases: add, search, list, delete, "
                             "clear")
    actions = kb.add_subparsers(dest="kb_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add an entry (CONTENT, or - to read stdin)")
    add.add_argument("content", help="what was found (- reads it from stdin)")
    add.add_argument("--title", default="",
                     help="a short title (lists show it instead of the first line)")
    add.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
    add.add_argument("--session", help="the assistant session this came from")
    add.add_argument("--anchor", action="append", default=[], metavar="PATH:START-END",
                     help="code the entry is about (path relative to where you stand, like "
                     "--file and --manual); marked stale when it changes (repeatable)")
    search = actions.add_parser("search", help="entries relevant to QUERY")
    search.add_argument("query", help="what to look for, in plain words")
    search.add_argument("-k", "--top-k", type=_int_from(1), default=10,
                        help="number of entries to return (default 10)")
    search.add_argument("--threshold", type=_cosine,
                        help="minimum cosine similarity, -1..1 (default: the "
                        "knowledgeThreshold setting)")
    listing = actions.add_parser("list", help="entries, newest first")
    listing.add_argument("--limit", type=_int_from(1), default=50,
                         help="entries per page (default 50)")
    listing.add_argument("--offset", type=_int_from(0), default=0,
                         help="entries to skip, newest first (default 0)")
    delete = actions.add_parser("delete", help="delete one entry")
    delete.add_argument("id")
    actions.add_parser("clear", help="delete every entry of the mode")
    for action in (add, search, listing, delete, actions.choices["clear"]):
        action.add_argument("--mode", required=True, help=MODE_HELP)
        action.add_argument("--root", default=".", help="workspace folder (default: .)")
        add_workspace_options(action)
    for action in (search, listing):
        action.add_argument("--since", help="only entries created at or after this UTC time "
                            "(ISO 8601, e.g. 2026-11-22 or 2026-11-22T10:00:00Z)")
        action.add_argument("--until", help="only entries created at or before this time")


def _check_mode(ws: Workspace, mode: str) -> None:
    problem = unknown_mode_message(mode, ws.settings.extra_modes)
    if problem:
        raise RagLspError(problem)


def cmd_context(args: argparse.Namespace, ws: Workspace, print_json) -> int:
    from rag_lsp.context.builder import ContextRequest, ManualRef, Source, build_context

    _check_mode(ws, args.mode)
    if ws.token_counter is None:
        raise RagLspError(f"context needs the model's tokenizer: {ws.model_error}")
    request = ContextRequest(mode=args.mode, token_budget=args.budget, query=args.query,
                             include_knowledge=not args.no_knowledge)
    if args.file:
        path, start, end = _path_and_lines(args.file, "--file")
        request.active_file = resolved(Path(path), "--file")
        request.selection = (start, end) if start else None
    for spec in args.manual:
        path, start, end = _path_and_lines(spec, "--manual")
        request.manual.append(ManualRef(resolved(Path(path), "--manual"), start, end))
    if not (args.query or args.file or args.manual):
        raise RagLspError("give a QUERY, or --file to derive one from, or --manual files")
    result = build_context([Source(ws, ws.knowledge)], request, ws.token_counter)
    if args.json:
        print_json({
            "context": result.context, "totalTokens": result.total_tokens,
            "budget": result.budget, "query": result.query,
            "items": [_item(i) for i in result.items],
            "dropped": [{**_item(d.item), "reason": d.reason} for d in result.dropped],
        })
        return EXIT_OK
    if result.context:
        print(result.context)
    print_dim(f"{len(result.items)} items, {result.total_tokens}/{result.budget} tokens, "
              f"{len(result.dropped)} dropped; query {result.query[:60]!r}")
    return EXIT_OK


def _item(item) -> dict:
    return {"source": item.source, "path": item.path, "startLine": item.start_line,
            "endLine": item.end_line, "title": item.title, "score": item.score,
            "tokens": item.tokens}


def cmd_kb(args: argparse.Namespace, ws: Workspace, print_json) -> int:
    _check_mode(ws, args.mode)
    kb = ws.knowledge
    times = {key: parse_time(getattr(args, key)) for key in ("since", "until")
             if getattr(args, key, None)}
    action = args.kb_command
    if action == "add":
        content = sys.stdin.read() if args.content == "-" else args.content
        anchors = []
        for spec in args.anchor:
            path, start, end = _path_and_lines(spec, "--anchor")
            if start is None:
                raise RagLspError(f"--anchor {spec!r}: give lines, e.g. {path}:10-24")
            anchors.append(AnchorSpec(str(resolved(Path(path), "--anchor")), start, end))
        entry = kb.add(args.mode, content, title=args.title, tags=args.tag,
                       session_id=args.session, anchors=anchors)
        return _show([entry], args, print_json, single=True)
    if action == "search":
        threshold = (ws.settings.knowledge_threshold if args.threshold is None
                     else args.threshold)
        return _show(kb.search(args.mode, args.query, top_k=args.top_k, threshold=threshold,
                               **times), args, print_json)
    if action == "list":
        page, total = kb.list(args.mode, limit=args.limit, offset=args.offset, **times)
        return _show(page, args, print_json, total=total)
    if action == "delete":
        removed = int(kb.delete(args.mode, args.id))
        if not removed:
            raise RagLspError(f"no entry {args.id!r} in the {args.mode} knowledge base")
    else:
        removed = kb.clear(args.mode)
    if args.json:
        print_json({"removed": removed})
    else:
        print(f"removed {removed} entr{'y' if removed == 1 else 'ies'}")
    return EXIT_OK


def _show(entries: list[KnowledgeEntry], args, print_json, *, single: bool = False,
          total: int | None = None) -> int:
    if args.json:
        if single:
            print_json(entries[0].to_dict())
        else:
            print_json({"entries": [e.to_dict() for e in entries],
                        **({"total": total} if total is not None else {})})
        return EXIT_OK
    for entry in entries:
        score = f"{entry.score:.3f}  " if entry.score is not None else ""
        stale = f"  [stale: {entry.stale_reason}]" if entry.stale else ""
        title = entry.title or entry.content.split("\n", 1)[0][:70]
        print(f"{score}{entry.created_at}  {entry.id}  {title}{stale}")
    if total is not None:
        print_dim(f"{len(entries)} of {total} entries")
    return EXIT_OK
