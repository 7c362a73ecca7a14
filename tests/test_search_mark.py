"""An index's writer sees when searches last read its full-text index, also those of another
process sharing the index (rag_lsp.store.search_mark): past 50k chunks it folds each batch in
only while searches come."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from rag_lsp.store.search_mark import MARK_EVERY_SECONDS, SearchMark

REPO = Path(__file__).resolve().parent.parent


def age(mark: SearchMark, seconds: float) -> None:
    """The mark file as if last touched ``seconds`` ago."""
    then = time.time() - seconds
    os.utime(mark.path, (then, then))


def test_a_search_in_another_process_is_seen_for_the_window(tmp_path):
    writer = SearchMark(tmp_path)
    assert not writer.searched_within(60)
    subprocess.run([sys.executable, "-c", "import sys\nfrom rag_lsp.store.search_mark import "
                    "SearchMark\nSearchMark(sys.argv[1]).searched()", str(tmp_path)],
                   cwd=REPO, check=True, timeout=60)
    assert writer.searched_within(60)
    age(writer, 61)
    assert not writer.searched_within(60)


def test_a_process_sees_its_own_searches_without_the_file(tmp_path):
    mark = SearchMark(tmp_path / "gone")  # a folder that is not there: no error
    mark.searched()
    assert not mark.path.exists()
    assert mark.searched_within(60)
    assert not mark.searched_within(0.0)


def test_searches_touch_the_file_at_most_every_few_seconds(tmp_path):
    mark = SearchMark(tmp_path)
    mark.searched()
    age(mark, 30)
    mark.searched()  # within MARK_EVERY_SECONDS of the first: left as it was
    assert not SearchMark(tmp_path).searched_within(20)
    mark._marked_at -= MARK_EVERY_SECONDS  # noqa: SLF001 - as if that much time had passed
    mark.searched()
    assert SearchMark(tmp_path).searched_within(20)


def test_the_mark_file_is_the_owners_only(tmp_path):
    SearchMark(tmp_path).searched()
    assert (tmp_path / "searched").stat().st_mode & 0o077 == 0
