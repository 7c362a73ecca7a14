"""The README's agent configurations start a working `rag-lsp mcp`, exactly as written there
(placeholder paths substituted): each one is launched through the MCP SDK's client and lists
its tools. The agents themselves (Claude Code, VS Code, Cursor, Codex) are not run."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

from rag_lsp.embedding.shared_cache import CACHE_DIR_ENV

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

README = Path(__file__).resolve().parents[1] / "README.md"
CHECKOUT = Path(__file__).resolve().parents[1]
# The installed command this checkout's venv provides (what the README tells users to use).
RAG_LSP = Path(sys.executable).with_name("rag-lsp")


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## Use with agents (MCP)", 1)[1].split("\n## ", 1)[0]


def readme_configurations() -> list[tuple[str, str, list[str]]]:
    """(label, command, args) of every configuration block in the section."""
    configs = []
    for lang, body in re.findall(r"```(bash|json|toml)\n(.*?)```", _section(), re.DOTALL):
        if lang == "bash":
            words = shlex.split(body.strip())
            command = words[words.index("--") + 1:]
            configs.append(("claude mcp add", command[0], command[1:]))
        elif lang == "json":
            servers = json.loads(body)
            key = "servers" if "servers" in servers else "mcpServers"
            entry = servers[key]["rag-lsp"]
            configs.append((key, entry["command"], entry["args"]))
        elif tomllib is None:  # Python 3.10: the block is not read
            configs.append(("codex", "", []))
        else:
            entry = tomllib.loads(body)["mcp_servers"]["rag-lsp"]
            configs.append(("codex", entry["command"], entry["args"]))
    return configs


def _substitute(value: str, root: Path) -> str:
    return (value.replace("/path/to/rag-lsp/.venv/bin/rag-lsp", str(RAG_LSP))
            .replace("/path/to/rag-lsp", str(CHECKOUT))
            .replace("/path/to/repo", str(root))
            .replace("${workspaceFolder}", str(root)))


def test_the_section_has_the_four_clients():
    labels = [label for label, _, _ in readme_configurations()]
    assert labels == ["claude mcp add", "servers", "mcpServers", "codex"]


@pytest.mark.parametrize("config", readme_configurations(), ids=lambda c: c[0])
async def test_each_configuration_starts_the_server(config, sample_root):
    if not RAG_LSP.exists():
        pytest.skip(f"no {RAG_LSP}: the project is not installed in this interpreter's venv")
    _label, command, args = config
    if not command:
        pytest.skip("reading the Codex block needs tomllib (Python 3.11)")
    # The environment a client gives (the SDK's default), plus the test's own cache folder.
    env = {**get_default_environment(), CACHE_DIR_ENV: os.environ[CACHE_DIR_ENV]}
    params = StdioServerParameters(command=_substitute(command, sample_root),
                                   args=[_substitute(a, sample_root) for a in args], env=env)
    with open(sample_root.parent / "stderr.log", "w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
    assert "search_code" in [t.name for t in tools.tools]
