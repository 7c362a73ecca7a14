"""Knowledge bases: real model, real LanceDB in the tmp folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from rag_lsp.config import Settings
from rag_lsp.errors import RagLspError
from rag_lsp.knowledge import BUILTIN_MODES, AnchorSpec, KnowledgeBase, parse_time
from rag_lsp.workspace import Workspace
from tests.conftest import write_files

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=timezone.utc)

CODE = {
    "src/retry.py": '''
        import time


        def fetch_with_retry(client, url, attempts=3):
            """Retry a GET with exponential backoff."""
            for attempt in range(attempts):
                try:
                    return client.get(url, timeout=5)
                except TimeoutError:
                    time.sleep(2 ** attempt)
            raise TimeoutError(url)


        def unrelated():
            return 42
        ''',
    "src/pkg/util.py": """
        def helper():
            return "help"
        """,
}
# fetch_with_retry: lines 4-11 of src/retry.py
RETRY = AnchorSpec("src/retry.py", 4, 11)

NOTES = [
    ("Redirect loop", "The HTTP client keeps following 302 redirects between two hosts "
     "forever because max_hops is reset on every call.", ["http"]),
    ("Password hashing", "Passwords are hashed with PBKDF2 and a random 16-byte salt per "
     "user; verification splits the stored salt and digest.", ["auth"]),
    ("Cache eviction", "The LRU cache evicts the least recently used entry once capacity "
     "is exceeded, using OrderedDict.move_to_end.", ["cache"]),
    ("Deployment", "The service runs in a container behind an nginx reverse proxy.", []),
    ("Button colours", "Primary buttons are blue, secondary ones grey, in the stylesheet.", []),
]


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "repo"
    write_files(root, CODE)
    return root


def open_kb(root: Path, embedder, *, model: bool = True) -> KnowledgeBase:
    index_dir = Settings().index_dir(root)
    if not model:
        return KnowledgeBase(index_dir, root, None, embedder.dimension)
    return KnowledgeBase(index_dir, root, embedder.embed, embedder.dimension)


@pytest.fixture
def kb(root, embedder) -> KnowledgeBase:
    return open_kb(root, embedder)


def add_notes(kb: KnowledgeBase, mode: str = "debugger") -> dict[str, str]:
    ids = {}
    for i, (title, content, tags) in enumerate(NOTES):
        entry = kb.add(mode, content, title=title, tags=tags, now=T0 + timedelta(hours=i))
        ids[title] = entry.id
    return ids


# ---- add and search -------------------------------------------------------------------


def test_search_finds_the_relevant_entry_first(kb):
    ids = add_notes(kb)
    hits = kb.search("debugger", "why does the http client loop on redirects forever?")
    assert hits[0].id == ids["Redirect loop"]
    assert 0.2 <= hits[-1].score <= hits[0].score <= 1.0 + 1e-6
    assert kb.search("debugger", "redirect loops", threshold=0.99) == []
    hits = kb.search("debugger", "how are user passwords salted?", top_k=2)
    assert hits[0].id == ids["Password hashing"] and len(hits) <= 2
    wire = hits[0].to_dict()
    assert set(wire) == {"id", "mode", "title", "content", "tags", "sessionId", "createdAt",
                         "anchors", "stale", "staleReason", "score"}
    assert wire["title"] == "Password hashing" and wire["tags"] == ["auth"]
    assert wire["sessionId"] is None and wire["stale"] is False


def test_search_stays_in_its_mode(kb):
    add_notes(kb, "debugger")
    security = kb.add("security", "Session cookies lack the Secure flag.", title="Cookies")
    hits = kb.search("security", "the HTTP client follows redirects forever", threshold=0.0)
    assert [h.id for h in hits] == [security.id]
    assert all(h.mode == "debugger" for h in kb.search("debugger", "cookies", threshold=0.0))
    assert kb.search("performance", "redirects") == []
    assert set(BUILTIN_MODES) >= {"debugger", "security"}


def test_since_and_until_bound_creation_time_inclusively(kb):
    ids = add_notes(kb)  # one entry per hour from T0
    query = "notes about the code"

    def found(**window):
        hits = kb.search("debugger", query, threshold=-1.0, **window)
        return {h.id for h in hits}

    assert found(since=T0 + timedelta(hours=3)) == {ids["Deployment"], ids["Button colours"]}
    assert found(until=T0 + timedelta(hours=1)) == {ids["Redirect loop"], ids["Password hashing"]}
    assert found(since=T0 + timedelta(hours=2), until=T0 + timedelta(hours=2)) == {
        ids["Cache eviction"]
    }
    page, total = kb.list("debugger", since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=2))
    assert total == 2 and [e.id for e in page] == [ids["Cache eviction"], ids["Password hashing"]]
    with pytest.raises(RagLspError, match="since .* is after until"):
        kb.list("debugger", since=T0 + timedelta(hours=1), until=T0)


def test_equally_relevant_entries_put_the_newer_first(kb):
    old = kb.add("planning", "Split the indexer into scan and embed stages.", now=T0)
    new = kb.add("planning", "Split the indexer into scan and embed stages.", now=T0 + timedelta(1))
    hits = kb.search("planning", "split the indexer")
    assert [h.id for h in hits] == [new.id, old.id]


def test_ties_beyond_the_first_candidates_still_rank_newest_first(kb):
    ids = [
        kb.add("planning", "Cache the parsed config.", now=T0 + timedelta(minutes=m)).id
        for m in range(15)
    ]
    hits = kb.search("planning", "cache the parsed config", top_k=3)
    assert [h.id for h in hits] == ids[::-1][:3]


def test_created_at_is_utc_iso_with_z(kb):
    local = datetime(2026, 11, 22, 13, 30, 5, 123456, tzinfo=timezone(timedelta(hours=1)))
    entry = kb.add("debugger", "A note", now=local)
    assert entry.created_at == "2026-11-22T12:30:05.123456Z"
    assert kb.list("debugger")[0][0].created_at == entry.created_at


def test_add_rejects_empty_content_and_mode(kb):
    with pytest.raises(RagLspError, match="content"):
        kb.add("debugger", "   ")
    with pytest.raises(RagLspError, match="mode"):
        kb.add("", "something")


def test_values_with_quotes_are_quoted_in_filters(kb):
    entry = kb.add("o'brien's mode", "A note", tags=["it's"], session_id="s'1")
    assert kb.list("o'brien's mode")[0][0].session_id == "s'1"
    assert kb.search("o'brien's mode", "a note")[0].id == entry.id
    assert kb.delete("o'brien's mode", entry.id)
    assert not kb.delete("debugger", "x' OR '1'='1")


# ---- list, delete, clear, persistence ---------------------------------------------------


def test_list_is_newest_first_with_paging(kb):
    ids = add_notes(kb)
    newest_first = [ids[title] for title, _, _ in reversed(NOTES)]
    page, total = kb.list("debugger", limit=2)
    assert total == 5 and [e.id for e in page] == newest_first[:2]
    page, total = kb.list("debugger", limit=2, offset=2)
    assert total == 5 and [e.id for e in page] == newest_first[2:4]
    page, _ = kb.list("debugger", limit=2, offset=4)
    assert [e.id for e in page] == newest_first[4:]
    assert kb.list("security") == ([], 0)


def test_delete_and_clear_report_what_they_removed(kb):
    ids = add_notes(kb)
    kb.add("security", "Tokens are compared with hmac.compare_digest.")
    assert kb.delete("security", ids["Deployment"]) is False  # wrong mode
    assert kb.delete("debugger", ids["Deployment"]) is True
    assert kb.delete("debugger", ids["Deployment"]) is False
    assert kb.list("debugger")[1] == 4
    assert kb.clear("debugger") == 4
    assert kb.clear("debugger") == 0
    assert kb.list("security")[1] == 1


def test_an_empty_knowledge_base_answers_without_creating_files(tmp_path, embedder):
    root = tmp_path / "empty"
    root.mkdir()
    kb = open_kb(root, embedder)
    assert kb.list("debugger") == ([], 0)
    assert kb.search("debugger", "anything") == []
    assert kb.delete("debugger", "nope") is False and kb.clear("debugger") == 0
    assert kb.stale_for_paths(["src/a.py"]) == 0
    assert not (root / ".rag-lsp").exists()


def test_entries_survive_reopening(kb, root, embedder):
    ids = add_notes(kb)
    again = open_kb(root, embedder)
    assert again.list("debugger")[1] == 5
    assert again.search("debugger", "LRU eviction")[0].id == ids["Cache eviction"]
    # and one instance sees what another adds
    extra = again.add("debugger", "A late note about redirects")
    assert extra.id in {e.id for e in kb.list("debugger")[0]}


DURABILITY_SCRIPT = """
import sys, time
from pathlib import Path
from rag_lsp.embedding.embedder import OnnxEmbedder
from rag_lsp.embedding.model_files import find_model
from rag_lsp.knowledge import KnowledgeBase

embedder = OnnxEmbedder(find_model(sys.argv[3]))
kb = KnowledgeBase(Path(sys.argv[1]), Path(sys.argv[2]), embedder.embed, embedder.dimension)
entry = kb.add("debugger", "The nightly job dies when the disk is full", title="disk full")
print(entry.id, flush=True)
time.sleep(600)
"""


def test_an_added_entry_survives_kill_9(root, embedder, model_files):
    index_dir = Settings().index_dir(root)
    with subprocess.Popen(
        [sys.executable, "-c", DURABILITY_SCRIPT, str(index_dir), str(root),
         str(model_files.onnx_path.parent)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[1],
    ) as proc:
        guard = threading.Timer(180, proc.kill)  # never hang the suite
        guard.start()
        try:
            entry_id = proc.stdout.readline().strip()
            os.kill(proc.pid, signal.SIGKILL)  # right after add() returned
            proc.wait()
        finally:
            guard.cancel()
        assert entry_id, proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL
    kb = open_kb(root, embedder)
    page, total = kb.list("debugger")
    assert total == 1 and page[0].id == entry_id and page[0].title == "disk full"
    assert kb.search("debugger", "disk full crash")[0].id == entry_id


def test_knowledge_survives_a_full_code_rebuild(root, embedder):
    kb = open_kb(root, embedder)
    before = kb.add("debugger", "Retries hide the real timeout", anchors=[RETRY])
    ws = Workspace.open(root, Settings(), embedder=embedder)
    ws.index()  # the first index (no manifest yet) drops stray tables too
    during = kb.add("planning", "Make the retry count configurable")
    ws.index(full=True)
    assert ws.status().chunks > 0
    assert ws.search("retry with exponential backoff").results[0].path == "src/retry.py"
    for fresh in (kb, open_kb(root, embedder)):
        assert [e.id for e in fresh.list("debugger")[0]] == [before.id]
        assert fresh.search("planning", "configurable retries")[0].id == during.id


def test_without_the_model_entries_can_be_listed_but_not_added(kb, root, embedder):
    ids = add_notes(kb)
    degraded = open_kb(root, embedder, model=False)
    assert degraded.degraded
    with pytest.raises(RagLspError, match="embedding model.*rag-lsp model install"):
        degraded.add("debugger", "a note")
    with pytest.raises(RagLspError, match="embedding model"):
        degraded.search("debugger", "redirects")
    assert degraded.list("debugger")[1] == 5
    assert degraded.delete("debugger", ids["Deployment"])
    assert degraded.clear("debugger") == 4


# ---- anchors ----------------------------------------------------------------------------


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")


def test_anchor_is_hashed_and_shown_on_the_wire(kb):
    entry = kb.add("debugger", "Retries hide the real timeout", anchors=[RETRY])
    [anchor] = entry.anchors
    assert (anchor.path, anchor.start_line, anchor.end_line) == ("src/retry.py", 4, 11)
    assert entry.to_dict()["anchors"] == [
        {"path": "src/retry.py", "startLine": 4, "endLine": 11, "sha256": anchor.sha256}
    ]
    assert not entry.stale and entry.stale_reason is None


def test_editing_the_anchored_code_makes_the_entry_stale(kb, root):
    entry = kb.add("debugger", "Retries hide the real timeout", anchors=[RETRY])
    edit(root, "src/retry.py", "timeout=5", "timeout=30")
    [hit] = kb.search("debugger", "timeouts hidden by retries")
    assert hit.id == entry.id and hit.stale
    assert hit.stale_reason == "src/retry.py:L4-L11 changed"
    # editing code outside the anchor does not matter; a revert makes it fresh again
    edit(root, "src/retry.py", "return 42", "return 43")
    edit(root, "src/retry.py", "timeout=30", "timeout=5")
    [again] = kb.list("debugger")[0]
    assert not again.stale and again.stale_reason is None


def test_lines_inserted_above_move_the_anchor(kb, root, embedder):
    entry = kb.add("debugger", "Retries hide the real timeout", anchors=[RETRY])
    edit(root, "src/retry.py", "import time\n", "import time\nimport logging\n\nLOG = 1\n")
    assert kb.stale_for_paths(["src/retry.py"]) == 1  # range moved and saved
    assert kb.stale_for_paths(["src/retry.py"]) == 0  # nothing new since
    [now] = open_kb(root, embedder).list("debugger")[0]
    assert now.id == entry.id and not now.stale
    assert (now.anchors[0].start_line, now.anchors[0].end_line) == (7, 14)
    assert now.anchors[0].sha256 == entry.anchors[0].sha256


def test_deleting_the_file_makes_the_entry_stale(kb, root):
    kb.add("security", "helper() returns a constant", anchors=[AnchorSpec("src/pkg/util.py", 1, 2)])
    kb.add("security", "Unanchored note")
    (root / "src/pkg/util.py").unlink()
    assert kb.stale_for_paths([str(root / "src/pkg")]) == 1  # a folder, given absolute
    stale = [e for e in kb.list("security")[0] if e.stale]
    assert [e.stale_reason for e in stale] == ["src/pkg/util.py no longer exists"]


def test_crlf_files_hash_like_lf_files(kb, root):
    path = root / "src/retry.py"
    entry = kb.add("debugger", "Retry note", anchors=[RETRY])
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert kb.check_anchors([entry])[0].stale is False


def test_bad_anchors_are_refused_with_the_line_count(kb):
    with pytest.raises(RagLspError, match=r"src/retry.py:L10-L40 .*has 15 lines"):
        kb.add("debugger", "note", anchors=[AnchorSpec("src/retry.py", 10, 40)])
    with pytest.raises(RagLspError, match="src/missing.py does not exist"):
        kb.add("debugger", "note", anchors=[AnchorSpec("src/missing.py", 1, 1)])
    with pytest.raises(RagLspError, match="1-based"):
        kb.add("debugger", "note", anchors=[AnchorSpec("src/retry.py", 5, 4)])
    with pytest.raises(RagLspError, match=r"\.\."):
        kb.add("debugger", "note", anchors=[AnchorSpec("../outside.py", 1, 1)])
    with pytest.raises(RagLspError, match="NUL"):
        kb.add("debugger", "note", anchors=[AnchorSpec("src/re\0try.py", 1, 1)])
    assert kb.list("debugger") == ([], 0)


def test_an_anchor_never_reads_a_file_outside_through_a_link(kb, root, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.py").write_text("TOKEN = 'hunter2'\nOTHER = 1\n")
    (root / "src/linked.py").symlink_to(outside / "secret.py")
    (root / "src/linkdir").symlink_to(outside, target_is_directory=True)
    for path in ("src/linked.py", "src/linkdir/secret.py", str(root / "src/linkdir/secret.py")):
        with pytest.raises(RagLspError, match="leads outside the workspace") as refused:
            kb.add("security", "note", anchors=[AnchorSpec(path, 1, 9)])
        assert "2 lines" not in str(refused.value)  # says nothing of the file out there
    assert kb.list("security") == ([], 0)
    # A file anchored while inside, later swapped for a link out: gone, not read there.
    entry = kb.add("security", "helper note", anchors=[AnchorSpec("src/pkg/util.py", 1, 2)])
    (root / "src/pkg/util.py").unlink()
    (root / "src/pkg/util.py").symlink_to(outside / "secret.py")
    [now] = kb.check_anchors([entry])
    assert now.stale_reason == "src/pkg/util.py no longer exists"


# ---- time parsing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22", datetime(2026, 11, 22, tzinfo=timezone.utc)),
        ("2026-11-22T12:30:05Z", datetime(2026, 11, 22, 12, 30, 5, tzinfo=timezone.utc)),
        ("2026-11-22T13:30:05+01:00", datetime(2026, 11, 22, 12, 30, 5, tzinfo=timezone.utc)),
        ("2026-11-22T12:30:05.5", datetime(2026, 11, 22, 12, 30, 5, 500000, tzinfo=timezone.utc)),
    ],
)
def test_parse_time(text, expected):
    parsed = parse_time(text)
    assert parsed == expected and parsed.tzinfo == timezone.utc


@pytest.mark.parametrize("text", ["yesterday", "", "2026-13-01", "Z"])
def test_parse_time_says_what_it_expects(text):
    with pytest.raises(RagLspError, match="ISO 8601"):
        parse_time(text)


def test_a_new_knowledge_base_folder_is_private(tmp_path, embedder):
    index_dir = tmp_path / "kb-index"
    kb = KnowledgeBase(index_dir, tmp_path, embedder.embed, embedder.dimension)
    kb.add("debugger", "Retries hide a flaky connection.")
    assert index_dir.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("threshold", [float("nan"), 1.5, -2.0])
def test_a_knowledge_threshold_outside_the_cosine_range_is_refused(kb, threshold):
    add_notes(kb)
    with pytest.raises(RagLspError, match="a cosine similarity, a number from -1 to 1"):
        kb.search("debugger", "redirects", threshold=threshold)


def test_a_deleted_workspace_folder_is_not_made_again_to_hold_a_note(kb, root):
    shutil.rmtree(root)
    with pytest.raises(RagLspError, match="no longer exists; nothing was saved"):
        kb.add("debugger", "a note")
    assert not root.exists()
