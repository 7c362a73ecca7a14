"""Lines as editors (and LSP positions) number them: ``\\n``, ``\\r\\n`` and a lone ``\\r`` each
end a line, nothing else does. The index reads files the same way (``read_text_file`` turns
each ending into ``\\n``), so a range read back from disk names the lines the index means.
``str.splitlines`` is not this: it also breaks at form feeds and other separators, which
old C and Python sources hold, and every line after one would be off by one."""

from __future__ import annotations


def editor_lines(text: str) -> list[str]:
    """``text``'s lines; the empty line after a final line ending counts (a cursor at the end
    of a file sits on it)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
