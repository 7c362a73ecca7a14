"""The `rag-lsp index` progress off a terminal: plain lines, not a bar that cannot redraw."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from rag_lsp.cli import console
from rag_lsp.cli.console import PLAIN_LINE_SECONDS, IndexProgressBar
from rag_lsp.indexing.progress import IndexProgress


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def piped_stderr(monkeypatch) -> io.StringIO:
    out = io.StringIO()
    # As stderr_console makes it (no markup or emoji codes), but piped into ``out``.
    piped = Console(file=out, force_terminal=False, highlight=False, soft_wrap=True,
                    markup=False, emoji=False)
    monkeypatch.setattr(console, "stderr_console", lambda: piped)
    return out


def _index_event(files_done: int) -> IndexProgress:
    return IndexProgress("index", files_done, 40, chunks_embedded=files_done * 10,
                         work_done=files_done, work_total=40)


def test_off_a_terminal_a_line_each_phase_then_at_most_every_interval(piped_stderr):
    clock = FakeClock()
    with IndexProgressBar(clock=clock) as bar:
        bar(IndexProgress("scan", message="scanning files"))
        clock.now += 1
        bar(_index_event(2))
        clock.now += PLAIN_LINE_SECONDS - 0.01  # just within the interval: nothing more
        bar(_index_event(3))
        clock.now += 0.01  # the interval's end: one line
        bar(_index_event(30))
        bar(_index_event(31))
    lines = piped_stderr.getvalue().splitlines()
    assert lines == [
        "rag-lsp: scanning (0:00)",
        "rag-lsp: indexing 5%: 2 of 40 files, 20 chunks embedded (0:01)",
        "rag-lsp: indexing 75%: 30 of 40 files, 300 chunks embedded (0:31)",
    ]


def test_quiet_prints_nothing_off_a_terminal(piped_stderr):
    with IndexProgressBar(enabled=False) as bar:
        bar(IndexProgress("scan"))
        bar(_index_event(2))
    assert piped_stderr.getvalue() == ""


def test_a_name_in_brackets_is_printed_as_it_is(piped_stderr):
    with IndexProgressBar() as bar:
        bar(IndexProgress("draft", note="[bold]searches use the current index[/bold]"))
    assert "[bold]searches use the current index[/bold]" in piped_stderr.getvalue()
