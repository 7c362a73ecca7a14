"""Gitignore-style globs, compiled with a clear word for a pattern that cannot be read.

pathspec raises on patterns git itself takes in its stride (``[z-a]``, a lone ``\\``): git
skips a line it cannot read. A workspace's ignore files follow git (the bad line is skipped,
with a warning); a pattern the user typed (a search's path filter, the ``exclude`` setting)
is refused with a message naming it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable

import pathspec

from rag_lsp.errors import BadInputError

log = logging.getLogger(__name__)

GLOB_HINT = ("Write it as in a .gitignore file: `src/**`, `*.md`, `!keep.py`; "
             "a `[…]` range runs from low to high, a `\\` escapes the next character")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a gitignore-style glob pathspec can compile, or ``None``."""
    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except (ValueError, re.error) as exc:
        return str(exc)
    return None


def compile_globs(patterns: Iterable[str], what: str) -> pathspec.GitIgnoreSpec:
    """``patterns`` as one spec; :class:`BadInputError` naming ``what`` (e.g. "--path") and the
    first pattern that cannot be read. Compiled once per set of patterns: a filtered search
    checks, applies and (when nothing matched) explains the same ones."""
    patterns = tuple(patterns)
    try:
        return _compiled(patterns)
    except (ValueError, re.error):
        for pattern in patterns:  # each line compiles on its own: one of them failed
            problem = pattern_problem(pattern)
            if problem:
                raise BadInputError(
                    f"{what} `{pattern}` is not a valid gitignore-style glob ({problem}). "
                    f"{GLOB_HINT}.") from None
        raise


@functools.lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def lenient_globs(lines: list[str], source: object) -> pathspec.GitIgnoreSpec:
    """``lines`` of an ignore file as one spec, as git reads them: a line that cannot be read
    is skipped, with a warning naming ``source`` and the line."""
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        pass
    kept = []
    for number, line in enumerate(lines, start=1):
        problem = pattern_problem(line)
        if problem:
            log.warning("%s:%d: skipped %r, not a pattern git can read (%s)",
                        source, number, line, problem)
        else:
            kept.append(line)
    return pathspec.GitIgnoreSpec.from_lines(kept)
