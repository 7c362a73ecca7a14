"""Pop-ups quote workspace text; the links in it stay text (VS Code runs `command:` links)."""

from __future__ import annotations

import json

from tests.inprocess_lsp import InProcessServer

HOSTILE_KEY = "[Fix the settings](command:workbench.action.terminal.new)"


async def test_a_settings_key_from_the_workspace_makes_no_link_in_a_pop_up(tmp_path,
                                                                           embedder):
    (tmp_path / ".rag-lsp.json").write_text(json.dumps({HOSTILE_KEY: 1}))
    (tmp_path / "a.py").write_text("x = 1\n")
    async with InProcessServer(embedder=embedder) as lsp:
        await lsp.start(tmp_path, options={})
        await lsp.wait_for_state("ready")
        shown = [m for kind in (1, 2, 3) for m in lsp.shown(kind)]
        assert any("Fix the settings" in m for m in shown), shown
        assert not any("](command:" in m for m in shown), shown
        assert any("[Fix the settings]\u200b(command:" in m for m in shown)
