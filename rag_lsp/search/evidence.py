"""Evidence beyond similarity: does a chunk define a queried name, does its file's name or
folder say what the query asks, how many of the query's words does it contain."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet

from rag_lsp.search.calibration import Background
from rag_lsp.search.roles import MODULE_INDEX_FILES
from rag_lsp.terms import path_terms, split_identifier, stem

# A prefix shared by a query word and a path part counts from this many letters, when it is
# most of the shorter word (``util``/``utils``, ``dispatch``/``dispatcher``).
_MIN_PREFIX = 4
_PREFIX_SHARE = 0.8
_MIN_INFIX = 5  # a query word inside a compound name: ``dispatcher`` in ``urldispatcher``


def defines_name(defines: str, identifiers: Iterable[str]) -> bool:
    """Whether a chunk's defined names include a queried identifier: exact case, or any case
    when the query wrote the name in lower case (``application``)."""
    names = defines.split()
    if not names:
        return False
    lowered = None
    for identifier in identifiers:
        if identifier in names:
            return True
        if identifier.islower():
            lowered = lowered or {n.lower() for n in names}
            if identifier in lowered:
                return True
    return False


# Statements that make a name public from elsewhere: Rust's ``pub use a::{B, C};``, JS/TS
# ``export { B } from './a'`` (or ``export type {…}``, ``export * as B from``), and in a
# Python package's ``__init__.py``, ``from .a import B`` (an import anywhere else is a use).
_RUST_REEXPORT = re.compile(r"\bpub\s+use\s+([^;]*);")
_JS_REEXPORT = re.compile(r"\bexport\s+(?:type\s+)?\{([^}]*)\}|\bexport\s+\*\s+as\s+(\w+)")
_PY_IMPORT = re.compile(r"^\s*from\s+\S+\s+import\s+(\([^)]*\)|[^\n]*)", re.MULTILINE)


def reexports_name(text: str, path: str, identifiers: Iterable[str]) -> bool:
    """Whether a chunk re-exports a queried name (see ``_RUST_REEXPORT`` and friends): where
    a name defined outside the workspace (a sibling package of a monorepo, a dependency)
    enters it."""
    wanted = [i for i in identifiers if i in text or (i.islower() and i in text.lower())]
    if not wanted:
        return False
    lists = [m.group(1) for m in _RUST_REEXPORT.finditer(text)]
    lists += [m.group(1) or m.group(2) for m in _JS_REEXPORT.finditer(text)]
    if path.rpartition("/")[2] == "__init__.py":
        lists += [m.group(1) for m in _PY_IMPORT.finditer(text)]
    words = {w for names in lists for w in re.findall(r"\w+", names)}
    lowered = {w.lower() for w in words}
    return any(i in words or (i.islower() and i in lowered) for i in wanted)


def _module_path(path: str) -> tuple[str, str]:
    """(folder, file name) of the module a file is: a module's index file stands for its
    folder (``routing/mod.rs`` is ``routing``, as ``routing.rs`` would be)."""
    folder, _, name = path.rpartition("/")
    if name in MODULE_INDEX_FILES and folder:
        folder, _, name = folder.rpartition("/")
    return folder, name


def stem_is_name(path: str, identifiers: Iterable[str]) -> bool:
    """``routing.py`` (or ``routing/mod.rs``) for ``Routing``, ``state_manager.ts`` for
    ``StateManager``."""
    file_stem = _module_path(path)[1].split(".")[0].lower()
    return any(file_stem.replace("_", "") == i.lower().replace("_", "") for i in identifiers)


def _long_prefix(word: str, part: str) -> bool:
    """A prefix shared by ``word`` and ``part`` that is most of the shorter one
    (``util``/``utils``, ``dispatch``/``dispatcher``)."""
    shared = len(os.path.commonprefix((word, part)))
    return shared >= _MIN_PREFIX and shared >= _PREFIX_SHARE * min(len(word), len(part))


@functools.lru_cache(maxsize=16384)
def _parts(name: str) -> tuple[str, ...]:
    return tuple(p.lower() for p in split_identifier(name)) or (name.lower(),)


class PathMatcher:
    """How well file names, then folder names, answer one query's words (see
    :meth:`__call__`). One for each search: path parts such as ``client`` or ``utils``, and
    whole folder and file names, recur across a search's candidates and are looked up once
    each, and what it learns goes with it. (Caches keyed by the query's words kept 8.5 MB of
    other queries' lookups once full.)"""

    def __init__(self, words: tuple[str, ...]) -> None:
        self.words = words
        # A path part answers a word with the same stem, one holding the word or its stem
        # (``dispatcher`` in ``urldispatcher``), or one sharing a long prefix with it. The
        # words by stem and by first letters: a part finds the first two kinds by lookup
        # (a search meets some hundred parts); only the infix test goes through the words.
        self._by_stem: dict[str, list[str]] = {}
        self._by_prefix: dict[str, list[str]] = {}
        self._infixes: list[tuple[str, str]] = []  # (form, its word)
        for word in words:
            word_stem = stem(word)
            self._by_stem.setdefault(word_stem, []).append(word)
            if len(word) >= _MIN_PREFIX:
                self._by_prefix.setdefault(word[:_MIN_PREFIX], []).append(word)
            self._infixes += [(form, word) for form in {word, word_stem}
                              if len(form) >= _MIN_INFIX]
        self._long_words = [word for word in words if len(word) >= _MIN_INFIX]
        self._matched: dict[str, frozenset[str]] = {}
        self._names: dict[str, float] = {}
        self._folders: dict[str, float] = {}

    def _matching_words(self, part: str) -> frozenset[str]:
        """The query words a path part answers."""
        found = self._matched.get(part)
        if found is None:
            matching = set(self._by_stem.get(stem(part), ()))
            matching.update(word for form, word in self._infixes if form in part)
            matching.update(word for word in self._by_prefix.get(part[:_MIN_PREFIX], ())
                            if _long_prefix(word, part))
            found = self._matched[part] = frozenset(matching)
        return found

    def __call__(self, path: str) -> tuple[float, float]:
        """(file name, folder name) scores of ``path``, 0..1 each.

        The file score needs both directions: the query's words found in the name, *and*
        the name explained by the query — ``completions.go`` fits "shell completion
        handling" better than ``bash_completions.go`` does.
        """
        if not self.words:
            return 0.0, 0.0
        folder, name = _module_path(path)
        file_stem = name.split(".")[0]
        file_score = self._names.get(file_stem)
        if file_score is None:
            file_score = self._names[file_stem] = self._name_score(file_stem)
        folder = folder.rpartition("/")[2]
        folder_score = self._folders.get(folder)
        if folder_score is None:
            folder_score = self._folders[folder] = self._folder_score(folder)
        return file_score, folder_score

    def _name_score(self, file_stem: str) -> float:
        parts = _parts(file_stem)
        matched = [self._matching_words(p) for p in parts]
        lowered = file_stem.lower()
        # Most of a search's files: no part answers a word, and no longer word is inside.
        if not any(matched) and not any(w in lowered for w in self._long_words):
            return 0.0
        in_name = frozenset().union(*matched)
        words = self.words
        found = [w for w in words if w in in_name or (len(w) >= _MIN_INFIX and w in lowered)]
        explained = sum(1 for p, m in zip(parts, matched, strict=True) if m or p.isdigit())
        return (len(found) / len(words)) ** 0.5 * explained / len(parts)

    def _folder_score(self, folder: str) -> float:
        folder_parts = _parts(folder) if folder else ()
        in_folder = frozenset().union(*(self._matching_words(p) for p in folder_parts))
        return sum(1 for w in self.words if w in in_folder) / len(self.words)


def path_match(path: str, words: tuple[str, ...]) -> tuple[float, float]:
    """:class:`PathMatcher`'s scores of one path (a search ranking many makes one matcher)."""
    return PathMatcher(words)(path)


class TermCoverage:
    """Share of the query's terms a chunk contains, each weighted by its rarity (0..1)."""

    def __init__(self, terms: tuple[str, ...], background: Background):
        self.weights = {t: background.idf(t) for t in terms}
        self.total = sum(self.weights.values())

    def __call__(self, present: AbstractSet[str], path: str = "") -> float:
        """Coverage by a chunk's terms (or a file's, gathered) and its file's path."""
        if self.total <= 0:
            return 0.0
        in_path = path_terms(path)
        # sum(), as ``total`` is: from Python 3.12 it adds floats more exactly than a loop,
        # and a chunk holding every term must come to 1.0
        return sum([w for t, w in self.weights.items()
                    if t in present or t in in_path]) / self.total
