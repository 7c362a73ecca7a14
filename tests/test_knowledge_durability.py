"""Knowledge entries survive a server restart and a `kill -9` right after `rag/kb.add`
answered."""

from __future__ import annotations

from rag_lsp.server.methods import RAG_KB_ADD, RAG_KB_LIST
from tests.conftest import make_sample_root
from tests.raw_lsp import RawServer


def test_entries_survive_restart_and_kill_9(tmp_path):
    root = make_sample_root(tmp_path)
    server = RawServer(root)
    server.wait_for_state("ready")
    kept = server.request(RAG_KB_ADD, {"mode": "security", "content": "Salts are 16 bytes."})
    server.close()

    server = RawServer(root)  # a clean restart
    added = server.request(RAG_KB_ADD, {"mode": "security", "content": "PBKDF2, 200k rounds."})
    assert "result" in added, added
    server.kill()  # right after the reply, before anything else could be flushed

    server = RawServer(root)
    listed = server.request(RAG_KB_LIST, {"mode": "security"})["result"]
    server.close()
    ids = [e["id"] for e in listed["entries"]]
    assert ids == [added["result"]["id"], kept["result"]["id"]]
