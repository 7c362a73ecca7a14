"""``rag-lsp mcp``: the workspace's index as Model Context Protocol tools, over stdio.

Built on the official ``mcp`` SDK's low-level server: the tools, their descriptions and
input schemas come from ``schemas/agent-tools.json`` (shared with the VS Code extension), not
from Python signatures. Start-up order matters to agents, which give a slow server up: the
handshake and ``tools/list`` are answered before the model or the index is touched; the
workspace opens once the client has listed the tools (or a moment after start), and the first
search waits only for the model, never for indexing.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from rag_lsp import __version__
from rag_lsp.agents.keeper import WorkspaceKeeper
from rag_lsp.agents.tools import WorkspaceTools, tool_catalogue
from rag_lsp.agents.wire_guard import GuardedStdin
from rag_lsp.config import Settings

log = logging.getLogger(__name__)

# Open the workspace this long after start even if the client never lists the tools.
OPEN_AT_LATEST_SECONDS = 1.0

INSTRUCTIONS = (
    "rag-lsp indexes this workspace locally (semantic + lexical, kept current as files "
    "change). Call search_code before grepping or opening files: it returns `path:start-end` "
    "locations with short snippets, best first, and nothing when nothing is relevant. Use "
    "get_context at the start of a task, and kb_add to record findings for later sessions."
)


def _tools() -> list[types.Tool]:
    return [types.Tool(name=t["name"], title=t.get("title"), description=t["description"],
                       input_schema=t["inputSchema"],
                       annotations=types.ToolAnnotations(**_snake(t.get("annotations", {}))))
            for t in tool_catalogue().values()]


def _snake(hints: dict) -> dict:
    """``readOnlyHint`` → ``read_only_hint`` (the SDK's field names)."""
    return {"".join(f"_{c.lower()}" if c.isupper() else c for c in k): v
            for k, v in hints.items()}


def build_server(keeper: WorkspaceKeeper) -> Server:
    tools = WorkspaceTools(keeper)
    listed = _tools()

    async def list_tools(ctx, params) -> types.ListToolsResult:
        keeper.start()  # the handshake is done: open the workspace now
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        answer = await anyio.to_thread.run_sync(tools.call, params.name, params.arguments,
                                                abandon_on_cancel=True)
        return types.CallToolResult(content=[types.TextContent(text=answer.text)],
                                    is_error=answer.is_error)

    return Server("rag-lsp", version=__version__, title="rag-lsp workspace search",
                  instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve(keeper: WorkspaceKeeper) -> None:
    server = build_server(keeper)

    async def open_at_latest() -> None:
        await anyio.sleep(OPEN_AT_LATEST_SECONDS)
        keeper.start()

    async with anyio.create_task_group() as group:
        group.start_soon(open_at_latest)
        stdin = GuardedStdin(serves=lambda method: server.get_request_handler(method)
                             is not None)
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]

            async def answer(msg_id: object, code: int, message: str) -> None:
                await write_stream.send(SessionMessage(types.JSONRPCError(
                    jsonrpc="2.0", id=msg_id, error=types.ErrorData(code=code, message=message))))

            stdin.answer_with(answer)
            await server.run(read_stream, write_stream, server.create_initialization_options())
        group.cancel_scope.cancel()  # the client went away


def serve_mcp(root: Path, settings: Settings | None = None, *, watch: bool = True) -> int:
    """Serve ``root`` until the client closes stdin."""
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # one line per event batch
    keeper = WorkspaceKeeper(root, settings, watch=watch)
    try:
        anyio.run(_serve, keeper)
    except KeyboardInterrupt:
        pass
    finally:
        keeper.close()
    log.info("rag-lsp mcp: client gone, exiting")
    sys.stdout.flush()
    if keeper.still_working:
        # Interpreter shutdown with a thread inside native code (onnxruntime, LanceDB,
        # SQLite) can abort the process (seen: exit status -6). Skip it: every write is a
        # commit of its own, and the kernel releases the writer lock.
        sys.stderr.flush()
        os._exit(0)
    return 0
