"""New and changed files are searchable by their words before the model has embedded them
(lexicalFirst)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from rag_lsp.config import Settings
from rag_lsp.indexing.indexer import DRAFT_MIN_FILES
from rag_lsp.search.ranking import Candidate
from rag_lsp.search.results import SearchFilters
from rag_lsp.store.chunk_ids import ChunkIds, content_key
from rag_lsp.store.draft import DraftIndex, is_gone
from rag_lsp.store.stored_places import unchanged_chunks
from rag_lsp.workspace import Workspace

from .conftest import write_files

TOPICS = ["parse the config file", "render the page header", "retry a failed upload",
          "compress old log files", "schedule the nightly report", "resize uploaded images"]


def _module(n: int) -> str:
    topic = TOPICS[n % len(TOPICS)]
    return f'''
        """Helpers to {topic}."""


        def step_{n}(value):
            """{topic.capitalize()}, step {n}."""
            return value + {n}
        '''


def _workspace_files(count: int) -> dict[str, str]:
    files = {f"pkg/mod_{n:02d}.py": _module(n) for n in range(count)}
    # The one file that answers; scanned last, so no batch before it can have embedded it.
    files["zz/ledger.py"] = '''
        """Reconcile ledger entries against the monthly bank statement."""

        AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


        class LedgerReconciler:
            """Matches each ledger entry with a statement line."""

            def reconcile(self, entries, statement):
                return [e for e in entries if e in statement]
        '''
    return files


# ---- the draft index on its own ------------------------------------------------------------


def test_a_window_is_found_by_its_words_and_leaves_with_its_file():
    draft = DraftIndex()
    draft.add("a.py", "import os\n\n" + "x = 1\n" * 50 + "def reconcile_ledger():\n    pass\n",
              "python")
    draft.add("b.py", "def other():\n    return 'ledger'\n", "python")
    rows = draft.search(["reconcil", "ledger"], (), 10)
    assert [r["path"] for r in rows] == ["a.py", "b.py"]
    assert rows[0]["start_line"] == 41 and rows[0]["end_line"] == 54  # the window with both
    assert "reconcile_ledger" in rows[0]["text"]
    draft.discard(["a.py"])
    assert [r["path"] for r in draft.search(["reconcil", "ledger"], (), 10)] == ["b.py"]
    draft.discard()
    assert len(draft) == 0 and draft.search(["ledger"], (), 10) == []


def test_windows_count_lines_as_editors_do():
    draft = DraftIndex()
    draft.add("old.c", "/* page one */\n\f\n" + "int x;\r\n" * 40 + "int ledger;\n", "c")
    (row,) = draft.search(["ledger"], (), 10)
    assert (row["start_line"], row["end_line"]) == (41, 43)  # ledger is on line 43


def test_the_window_defining_a_queried_name_comes_first():
    draft = DraftIndex()
    draft.add("use.py", "from m import Reconciler\nReconciler().run()\nReconciler.x\n", "python")
    draft.add("m.py", "class Reconciler:\n    pass\n", "python")
    rows = draft.search(["reconcil"], ("Reconciler",), 10)
    assert rows[0]["path"] == "m.py" and "Reconciler" in rows[0]["defines"].split()


def test_a_window_s_row_gives_only_the_searched_terms_it_holds():
    """All a search asks of a row's terms is which of its own the row holds (as of a row
    from the in-memory copy), so the draft gives those alone: the same a candidate keeps of
    every term of the window."""
    draft = DraftIndex()
    draft.add("pkg/ledger.py", "def reconcile(entries):\n    return entries\n", "python")
    draft.add("pkg/other.py", "class Reconciler:\n    pass\n", "python")
    searched = ("reconcil", "entri", "ledger", "absent")
    rows = draft.search(searched, ("Reconciler",), 10)
    assert {r["path"]: r["terms"] for r in rows} == {
        "pkg/ledger.py": "reconcil entri ledger",  # "ledger" is its path's word
        "pkg/other.py": "reconcil"}
    # found by the name it defines alone: none of the searched terms
    (by_name,) = draft.search(("absent",), ("Reconciler",), 10)
    assert (by_name["path"], by_name["terms"]) == ("pkg/other.py", "")
    windows = {w.path: w for w in draft._windows.values()}  # noqa: SLF001
    for row, asked in [(row, searched) for row in rows] + [(by_name, ("absent",))]:
        window = windows[row["path"]]
        assert len(window.terms.split()) > len(row["terms"].split())
        given, whole = Candidate(row), Candidate(window.row(window.terms))
        given.keep_terms(asked)
        whole.keep_terms(asked)
        assert given.terms == whole.terms


def test_filters_apply_and_a_full_draft_takes_no_more():
    draft = DraftIndex(max_bytes=100)
    assert draft.add("docs/a.md", "ledger notes\n", "markdown")
    assert draft.add("src/a.py", "ledger = 1\n", "python")
    assert not draft.add("src/big.py", "ledger\n" * 100, "python")
    only_python = lambda row: row["language"] == "python"  # noqa: E731
    assert [r["path"] for r in draft.search(["ledger"], (), 10, only_python)] == ["src/a.py"]


def test_an_entry_drafted_after_a_mark_outlives_a_discard_of_what_came_before():
    """A reader of a file after ``mark()`` (an update, a run) ends the drafts it has caught
    up with; a file saved again meanwhile keeps its newer draft."""
    draft = DraftIndex()
    draft.add("a.py", "ledger = 1\n", "python")
    draft.add("b.py", "ledger = 2\n", "python")
    mark = draft.mark()
    draft.add("b.py", "ledger = 3\nquota = 4\n", "python")  # saved again after the mark
    draft.discard(["a.py", "b.py"], drafted_before=mark)
    assert draft.paths() == {"b.py"}
    assert [r["text"] for r in draft.search(["quota"], (), 10)] == ["ledger = 3\nquota = 4"]
    draft.discard(drafted_before=draft.mark())
    assert len(draft) == 0 and draft.search(["ledger"], (), 10) == []


def test_a_file_drafted_empty_is_held_with_nothing_to_find():
    """A deleted file: held (so a search takes none of its stored chunks), found by nothing."""
    draft = DraftIndex()
    assert draft.add("gone.py", "", "")
    assert draft.paths() == {"gone.py"} and draft.search(["gone"], (), 10) == []


def test_a_newer_text_that_no_longer_fits_drops_the_older_one():
    draft = DraftIndex(max_bytes=100)
    assert draft.add("src/a.py", "ledger = 1\n", "python")
    assert not draft.add("src/a.py", "ledger\n" * 100, "python")
    assert draft.paths() == frozenset() and draft.search(["ledger"], (), 10) == []
    assert draft.add("src/b.py", "x" * 99, "python")  # what the old text held is free again


def test_saved_files_are_no_new_files():
    draft = DraftIndex()
    draft.add("new.py", "ledger = 1\n", "python")
    draft.add("saved.py", "ledger = 2\n", "python", saved=True)
    assert (len(draft), draft.new_files()) == (2, 1)
    draft.add("new.py", "ledger = 3\n", "python", saved=True)  # saved since
    assert (len(draft), draft.new_files()) == (2, 0)


def test_the_term_lists_do_not_keep_what_comes_and_goes():
    """Saves drafted and discarded again and again beside a few held files: the lists are
    built again without the dropped windows' ids (once nothing is held, too)."""
    draft = DraftIndex()
    draft.add("held.py", "ledger = 1\n", "python")
    for n in range(200):
        draft.add("saved.py", f"ledger = {n}\nquota = {n}\n", "python", saved=True)
        draft.discard(["saved.py"])
    assert len(draft._postings["ledger"]) <= 3  # noqa: SLF001 (held.py's, and a few dropped)
    assert [r["path"] for r in draft.search(["ledger"], (), 10)] == ["held.py"]
    draft.discard()
    assert draft._postings == {}  # noqa: SLF001


def test_a_discarded_window_is_not_found_while_the_lists_still_name_it():
    draft = DraftIndex()
    for name in ("a", "b", "c"):
        draft.add(f"{name}.py", f"ledger = {name!r}\n", "python")
    draft.discard(["b.py"])  # one window of three dropped: the lists are not built again
    assert draft._dropped == 1  # noqa: SLF001
    rows = draft.search(["ledger"], (), 10)
    assert sorted(r["path"] for r in rows) == ["a.py", "c.py"]
    assert all(r["terms"] == "ledger" for r in rows)


def _chunk(name: str, start: int, text: str, *, kind: str = "function",
           symbol: str = "") -> dict:
    """A stored chunk's row, its id as the indexer makes it (``name`` stands for its hash)."""
    return {"id": ChunkIds("a.py").next(start, name), "path": "a.py", "start_line": start,
            "end_line": start + text.count("\n"), "kind": kind, "symbol": symbol, "text": text}


def _kept(text: str, stored: list[dict]) -> dict[str, tuple[int, int]]:
    """:func:`unchanged_chunks` of ``text``, by the name each chunk was made with."""
    names = {row["id"]: content_key(row["id"]) for row in stored}
    return {names[chunk_id]: place
            for chunk_id, place in unchanged_chunks(text.split("\n"), stored).items()}


FETCH = "def fetch(url):\n    return get(url)"
RETRY = "def retry(call):\n    return call()"
SLEEP = "def pause():\n    sleep(1)"


def test_a_stored_chunk_the_file_still_holds_is_found_where_it_is_now():
    old = [_chunk("fetch", 1, FETCH), _chunk("retry", 4, RETRY), _chunk("pause", 7, SLEEP)]
    # Two lines inserted at the top, retry's body changed, pause kept as it was.
    now = "import time\n\n" + FETCH + "\n\n" + RETRY.replace("call()", "call(2)") + "\n\n" \
        + SLEEP + "\n"
    assert _kept(now, old) == {"fetch": (3, 4), "pause": (9, 10)}
    # Whole lines only: a text found inside a longer line, or beside more on its own, is not
    # the chunk (nor is a piece of one long line).
    assert _kept("x = 10\n", [_chunk("x", 1, "x = 1")]) == {}
    assert _kept("max = 1\n", [_chunk("x", 1, "x = 1")]) == {}
    assert _kept("x = 1", [_chunk("x", 1, "x = 1")]) == {"x": (1, 1)}  # the last line
    # A text found twice is put where it was nearest.
    twice = "\n".join([FETCH, "", "# copy", FETCH, ""])
    assert _kept(twice, [_chunk("copy", 4, FETCH)]) == {"copy": (5, 6)}
    assert _kept(twice, [_chunk("first", 1, FETCH)]) == {"first": (1, 2)}
    # Two copies, each where it was nearest; one copy left, the chunk nearest it keeps it.
    copies = [_chunk("first", 1, FETCH), _chunk("copy", 4, FETCH)]
    assert _kept(twice, copies) == {"first": (1, 2), "copy": (5, 6)}
    assert _kept("# top\n" + twice, copies) == {"first": (2, 3), "copy": (6, 7)}
    assert _kept("\n".join(["", "", "", FETCH]), copies) == {"copy": (4, 5)}


def test_a_signature_below_a_doc_comment_or_a_decorator_is_the_one_that_counts():
    doc = "/// Loads the thing.\npub fn load(path: &str) {\n    let a = 1;"
    pieces = [_chunk("head", 1, doc, symbol="load"),
              _chunk("tail", 4, "    a\n}", symbol="load")]
    text = doc + "\n    a\n}"
    assert set(_kept(text, pieces)) == {"head", "tail"}
    assert _kept(text.replace("fn load(", "fn read("), pieces) == {}
    decorated = "@cached\ndef load(path):\n    a = 1"
    pieces = [_chunk("head", 1, decorated, symbol="load"),
              _chunk("tail", 4, "    return a", symbol="load")]
    text = decorated + "\n    return a"
    assert _kept(text.replace("def load(", "def read("), pieces) == {}
    assert _kept(text.replace("@cached", "@cache"), pieces) == {"tail": (4, 4)}


def test_definitions_of_one_name_apart_are_no_pieces_of_one():
    """A property's getter and setter share a name: the getter renamed, the setter stays."""
    getter, setter = "def x(self):\n    return self._x", "def x(self, value):\n    self._x = value"
    rows = [_chunk("get", 1, getter, symbol="Box.x"), _chunk("between", 4, "y = 1", symbol=""),
            _chunk("set", 6, setter, symbol="Box.x")]
    text = "\n".join([getter, "", "y = 1", "", setter])
    assert set(_kept(text, rows)) == {"get", "between", "set"}
    assert set(_kept(text.replace("def x(self):", "def size(self):"), rows)) == {"between", "set"}


def test_the_pieces_of_a_definition_are_kept_only_while_its_signature_is_there():
    """Each piece was embedded with the definition's signature, which the first holds:
    renamed, none is kept; another piece changed, or the first below its signature, the rest
    are."""
    head, middle, tail = "def load(path):\n    a = 1", "    b = 2", "    return a + b"
    pieces = [_chunk("head", 1, head, symbol="load"), _chunk("middle", 3, middle, symbol="load"),
              _chunk("tail", 4, tail, symbol="load"), _chunk("other", 6, FETCH, symbol="fetch")]
    text = "\n".join([head, middle, tail, "", FETCH])
    assert _kept(text, pieces) == {"head": (1, 2), "middle": (3, 3), "tail": (4, 4),
                                   "other": (6, 7)}
    assert _kept(text.replace("def load(", "def read("), pieces) == {"other": (6, 7)}
    assert _kept(text.replace("b = 2", "b = 3"), pieces) == {"head": (1, 2), "tail": (4, 4),
                                                             "other": (6, 7)}
    assert _kept(text.replace("a = 1", "a = 0"), pieces) == {"middle": (3, 3), "tail": (4, 4),
                                                             "other": (6, 7)}


def test_a_saved_file_drafts_only_the_lines_its_stored_chunks_no_longer_cover():
    old = [_chunk("fetch", 1, FETCH), _chunk("retry", 4, RETRY)]
    long_run = "".join(f"step_{n} = {n}\n" for n in range(50))  # more than one window
    now = "import time\n\n" + FETCH + "\n\n" + RETRY.replace("call()", "call(2)") + "\n" \
        + long_run
    draft = DraftIndex()
    assert draft.add("a.py", now, "python", saved=True, stored=old)
    windows = draft.search(["import", "time", "retri", "step"], (), 10)
    assert sorted((w["start_line"], w["end_line"]) for w in windows) == [(1, 2), (5, 44),
                                                                         (45, 57)]
    assert "fetch" not in " ".join(w["text"] for w in windows)  # stored: not drafted again
    assert draft.kept_chunks("a.py") == 1
    view = draft.view()
    moved = view.moved_row(old[0])
    assert (moved["id"], moved["start_line"], moved["end_line"]) == (old[0]["id"], 3, 4)
    assert moved["kind"] == "function"  # the rest of the row as it was
    assert view.moved_row(old[1]) is None  # changed: its drafted windows stand for it
    other = {**old[0], "path": "b.py"}
    assert view.moved_row(other) is other  # a file not drafted
    # The chunk as an update of an earlier save wrote it since (a save during that update):
    # the same content at a line of its own, so an id of its own.
    written = _chunk("fetch", 2, FETCH)
    assert written["id"] != old[0]["id"]
    assert (view.moved_row(written)["start_line"], view.moved_row(written)["end_line"]) == (3, 4)
    # A chunk the draft was given that changed stays hidden, even where another chunk with its
    # content was kept (two copies of a text, one of them gone).
    copies = [_chunk("fetch", 1, FETCH), _chunk("fetch", 4, FETCH)]
    draft.add("a.py", FETCH + "\n", "python", saved=True, stored=copies)
    view = draft.view()
    assert view.moved_row(copies[0])["start_line"] == 1
    assert view.moved_row(copies[1]) is None
    assert draft.kept_chunks("a.py") == 1
    draft.add("a.py", now, "python", saved=True, stored=old)
    # Saved again without the stored chunks (say, the index could not be read): its words
    # alone, every line drafted.
    draft.add("a.py", now, "python", saved=True)
    assert draft.view().moved_row(old[0]) is None and draft.kept_chunks("a.py") == 0
    assert [(w["start_line"], w["end_line"])
            for w in draft.search(["fetch"], (), 10)] == [(1, 40)]
    draft.add("a.py", now, "python", saved=True, stored=old)
    draft.discard(["a.py"])
    assert draft.view().moved_row(old[0]) is old[0]
    # A deleted file keeps nothing, whatever was stored.
    draft.add("a.py", "", "", saved=True, gone=True, stored=old)
    assert draft.view().moved_row(old[0]) is None


def test_a_draft_is_narrowed_to_what_changed_only_while_it_is_the_same_entry():
    old = [_chunk("fetch", 1, FETCH), _chunk("retry", 4, RETRY)]
    now = "import time\n\n" + FETCH + "\n\n" + RETRY.replace("call()", "call(2)") + "\n"
    draft = DraftIndex()
    stamp = draft.add_entry("a.py", now, "python", saved=True)
    assert stamp is not None and draft.keep_stored("a.py", now, "python", old, stamp)
    assert draft.kept_chunks("a.py") == 1
    assert draft.keep_stored("a.py", now, "python", old, stamp)  # still that entry
    assert sorted((w["start_line"], w["end_line"])
                  for w in draft.search(["import", "retri"], (), 10)) == [(1, 2), (5, 7)]
    # Saved again meanwhile: the newer entry stays as it was made.
    draft.add("a.py", now, "python", saved=True)
    assert not draft.keep_stored("a.py", now, "python", old, stamp)
    assert draft.kept_chunks("a.py") == 0
    # Discarded meanwhile (its update landed), or deleted since: nothing comes back.
    stamp = draft.add_entry("a.py", now, "python", saved=True)
    draft.discard(["a.py"])
    assert not draft.keep_stored("a.py", now, "python", old, stamp) and len(draft) == 0
    stamp = draft.add_entry("a.py", "", "", saved=True, gone=True)
    assert not draft.keep_stored("a.py", now, "python", old, stamp)
    assert draft.add_entry("big.py", "x" * (64 << 20), "python") is None  # full
    assert draft.view().moved_row(old[0]) is None


# ---- through a workspace, real model and real LanceDB --------------------------------------


def _index_paused(ws: Workspace, after_chunks: int = 0
                  ) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Index ``ws`` in a thread that stops before a model batch (the first one after
    ``after_chunks`` chunks were embedded), until released."""
    reached, release = threading.Event(), threading.Event()

    def progress(event) -> None:
        if (event.phase == "index" and event.chunks_embedded >= after_chunks
                and not reached.is_set()):
            reached.set()
            assert release.wait(120)

    runner = threading.Thread(target=lambda: ws.index(progress=progress))
    runner.start()
    assert reached.wait(120), "indexing never reached the model"
    return runner, reached, release


@pytest.mark.parametrize("lexical_first", [True, False])
def test_new_files_answer_before_the_model_has_read_them(tmp_path: Path, embedder,
                                                         lexical_first: bool):
    root = tmp_path / "ws"
    write_files(root, _workspace_files(DRAFT_MIN_FILES + 5))
    ws = Workspace.open(root, Settings.from_dict({"lexicalFirst": lexical_first}),
                        embedder=embedder)
    runner, _reached, release = _index_paused(ws)
    try:
        during = ws.search("reconcile ledger entries with the bank statement").results
        packed = ws.find_chunks("reconcile ledger entries with the bank statement", limit=5)
        during_filtered = ws.search("reconcile ledger", filters=SearchFilters(
            paths=("pkg/**",))).results
        by_kind = ws.search("reconcile ledger", filters=SearchFilters(kinds=("text",))).results
        assert ws.status().chunks == 0  # nothing embedded or written yet
        assert ws.has_index()  # so the servers search it (they skip a folder without one)
        assert ws.status().drafted_files == (DRAFT_MIN_FILES + 6 if lexical_first else 0)
    finally:
        release.set()
        runner.join(300)
    if not lexical_first:
        assert during == []
        return
    assert during and during[0].path == "zz/ledger.py"
    assert "AKIAIOSFODNN7EXAMPLE" not in during[0].snippet  # drafts are redacted too
    assert packed and packed[0].path == "zz/ledger.py"  # context packing gets them too
    assert "LedgerReconciler" in packed[0].text and "AKIAIOSFODNN7EXAMPLE" not in packed[0].text
    assert all(r.path.startswith("pkg/") for r in during_filtered)
    assert by_kind == []  # a kind is what the chunker finds: drafts have none yet
    # Once written, the file answers from its real chunks and the draft is gone.
    after = ws.search("reconcile ledger entries with the bank statement").results
    assert after[0].path == "zz/ledger.py" and after[0].symbol
    assert len(ws._draft) == 0


def _rewrite_ledger(root: Path) -> None:
    """Every module changed, and the ledger's class renamed with a new method."""
    for path in sorted((root / "pkg").glob("mod_*.py")):
        path.write_text(path.read_text().replace("return value +", "return value -"))
    ledger = root / "zz/ledger.py"
    ledger.write_text(ledger.read_text().replace("LedgerReconciler", "StatementMatcher")
                      + "\n    def settle_overdraft(self, entries):\n        return entries\n")


def _lexical(ws: Workspace, query: str) -> list[tuple[str, str]]:
    return [(r.path, r.symbol) for r in ws.search(query, mode="lexical").results]


def test_changed_files_answer_by_their_new_words_before_the_model_has_read_them(
        tmp_path: Path, embedder):
    """A checkout or a pull: the run drafts the changed files too, whose stored chunks are of
    the old text."""
    root = tmp_path / "ws"
    write_files(root, _workspace_files(DRAFT_MIN_FILES + 5))
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    ws.index()
    assert _lexical(ws, "LedgerReconciler")[0] == ("zz/ledger.py", "LedgerReconciler")
    _rewrite_ledger(root)
    runner, _reached, release = _index_paused(ws)
    try:
        during_new = _lexical(ws, "StatementMatcher settle_overdraft")
        during_old = _lexical(ws, "LedgerReconciler")
        during_kept = _lexical(ws, "monthly bank statement")
        drafted = ws.status().drafted_files
        held = len(ws._draft)  # noqa: SLF001
    finally:
        release.set()
        runner.join(300)
    assert during_new[:1] == [("zz/ledger.py", "")]  # a drafted window
    assert ("zz/ledger.py", "LedgerReconciler") not in during_old  # its old chunk is shadowed
    # The docstring it still has is its stored chunk, found where it is.
    assert during_kept[:1] == [("zz/ledger.py", "ledger")], during_kept
    assert held == DRAFT_MIN_FILES + 6 and drafted == 0  # changed files are no new files
    assert _lexical(ws, "StatementMatcher")[0] == ("zz/ledger.py", "StatementMatcher")
    assert len(ws._draft) == 0  # noqa: SLF001


def test_files_only_chunked_again_are_not_drafted(tmp_path: Path, embedder):
    """New chunk settings: every file is chunked again, but its stored chunks hold its words."""
    root = tmp_path / "ws"
    write_files(root, _workspace_files(DRAFT_MIN_FILES + 5))
    Workspace.open(root, Settings.from_dict({}), embedder=embedder).index()
    ws = Workspace.open(root, Settings.from_dict({"chunkTokens": 96}), embedder=embedder)
    runner, _reached, release = _index_paused(ws)
    try:
        held = len(ws._draft)  # noqa: SLF001
        during = _lexical(ws, "LedgerReconciler")
    finally:
        release.set()
        runner.join(300)
    assert held == 0
    assert ("zz/ledger.py", "LedgerReconciler") in during


def test_files_touched_but_not_changed_are_not_drafted(tmp_path: Path, embedder):
    """A restart after ``touch`` (or a copy without times): new mtimes, the same bytes; their
    stored chunks hold their words, and a draft would hide them until the pass ends."""
    root = tmp_path / "ws"
    write_files(root, _workspace_files(DRAFT_MIN_FILES + 5))
    Workspace.open(root, Settings.from_dict({}), embedder=embedder).index()
    for path in root.rglob("*.py"):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    (root / "pkg/mod_00.py").write_text(_module(100))  # one real change, so the model runs
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    runner, _reached, release = _index_paused(ws)
    try:
        held = ws._draft.paths()  # noqa: SLF001
        during = _lexical(ws, "LedgerReconciler")
    finally:
        release.set()
        runner.join(300)
    assert held == {"pkg/mod_00.py"}  # the one changed, not the 25 touched
    assert during[0] == ("zz/ledger.py", "LedgerReconciler")  # its stored chunk


def test_a_few_new_files_are_not_drafted(tmp_path: Path, embedder):
    root = tmp_path / "ws"
    write_files(root, _workspace_files(3))
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    runner, _reached, release = _index_paused(ws)
    try:
        assert ws.search("reconcile ledger entries with the bank statement").results == []
    finally:
        release.set()
        runner.join(300)


def test_drafts_still_answer_once_some_files_are_embedded(tmp_path: Path, embedder,
                                                          monkeypatch):
    """The written chunks are unrelated to the question: their low similarity must not hide
    the drafted file that answers it (the semantic margin sees only the embedded part)."""
    monkeypatch.setattr("rag_lsp.indexing.indexer.WRITE_BATCH_CHUNKS", 8)
    root = tmp_path / "ws"
    write_files(root, _workspace_files(DRAFT_MIN_FILES + 5))
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    runner, _reached, release = _index_paused(ws, after_chunks=8)
    try:
        assert ws.status().chunks >= 8  # a batch is written
        during = ws.search("reconcile ledger entries with the bank statement").results
    finally:
        release.set()
        runner.join(300)
    assert during and during[0].path == "zz/ledger.py"
    assert (during[0].kind, during[0].symbol) == ("text", "")


def test_a_run_stopped_while_it_drafts_leaves_nothing_drafted(tmp_path: Path, embedder,
                                                             monkeypatch):
    root = tmp_path / "ws"
    write_files(root, _workspace_files(DRAFT_MIN_FILES + 5))
    ws = Workspace.open(root, Settings.from_dict({}), embedder=embedder)
    pauses = 0

    def stop_after_a_few_files() -> None:
        nonlocal pauses
        pauses += 1
        if pauses == 6:  # five files drafted
            raise KeyboardInterrupt

    monkeypatch.setattr(ws.priority, "wait_turn", stop_after_a_few_files)
    with pytest.raises(KeyboardInterrupt):
        ws.index()
    assert pauses == 6 and ws.drafted_files() == 0


def test_a_path_is_gone_when_it_or_a_folder_above_it_is():
    gone = frozenset({"src/auth", "docs/guide.md"})
    assert is_gone("docs/guide.md", gone)
    assert is_gone("src/auth/passwords.py", gone)
    assert is_gone("src/auth/deep/er/file.py", gone)
    assert not is_gone("src/authz/passwords.py", gone)  # a name that only begins alike
    assert not is_gone("src/auth.py", gone)
    assert not is_gone("docs/guide.md.bak", gone)
    assert not is_gone("src", gone)
    assert not is_gone("README.md", frozenset())


def test_the_gone_paths_are_the_deleted_entries_held():
    draft = DraftIndex()
    draft.add("src/auth", "", "", saved=True, gone=True)
    draft.add("src/lru.py", "class LRUCache:\n    pass\n", "python", saved=True)
    assert draft.view().gone == {"src/auth"}
    draft.discard(["src/auth"])
    assert draft.view().gone == frozenset()
