"""Words as search compares them: identifiers split into parts, stems, stop words.

Shared by indexing (what the full-text index sees) and search (how a query's words are matched
against chunks and paths), so both sides always cut words the same way.
"""

from __future__ import annotations

import functools
import re
import threading

import snowballstemmer

_HUMPS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Numbers of two or more digits count as words too (status codes, ports, "module 199").
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|[0-9]{2,}")
# English function words and question words: they say nothing about which code is meant.
STOP_WORDS = frozenset(
    "a an and are as at be by can do does for from has have how i if in into is it its me my "
    "not of on or should that the their there these this those to use used uses using via was "
    "we what when where which who why will with would you your".split()
)
# Snowball English, the stemmer LanceDB's full-text index uses too, so ranking and the index
# agree on which words match (``register``/``registered``/``registering`` → ``regist``).
# A stemmer keeps the word it works on in itself, so each thread has its own: indexing and
# searches stem at the same time (a shared one raised IndexError or returned wrong stems).
_STEMMERS = threading.local()


def split_identifier(name: str) -> list[str]:
    """``parseHTTPResponse_v2`` → ``["parse", "HTTP", "Response", "v", "2"]``."""
    parts: list[str] = []
    for piece in re.split(r"[_\-$]", name):
        parts.extend(_HUMPS.findall(piece))
    return parts


# Words of code a process has met, cached while they recur: on five repositories' sources
# (78k different words in 11k chunks) 16,384 entries each here kept 6.6 MB and missed 88k
# times in 830k lookups; 65,536 kept 21.3 MB and missed 78k times (no difference in time
# that this machine's noise let through).
_WORDS_CACHED = 16384


@functools.lru_cache(maxsize=_WORDS_CACHED)
def stem(word: str) -> str:
    """The Snowball English stem of ``word``, lower-cased (``dependencies`` → ``depend``)."""
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return stemmer.stemWord(word.lower())


def words(text: str) -> list[str]:
    """Alphanumeric words of ``text`` in order (identifiers whole, ``foo_bar`` → two)."""
    return _WORD.findall(text)


def text_terms(text: str) -> set[str]:
    """Stemmed, lower-case terms of ``text``: every word and every part of a compound one."""
    terms: set[str] = set()
    for word in set(words(text)):
        terms.update(_word_terms(word) if len(word) <= _CACHED_WORD else _split_terms(word))
    return terms


_CACHED_WORD = 64  # longer words (hashes, base64) are rarely seen twice: not worth a slot


@functools.lru_cache(maxsize=_WORDS_CACHED)
def _word_terms(word: str) -> tuple[str, ...]:
    """A word's stem and its parts' stems. Cached: code repeats its words, and splitting and
    stemming each occurrence was most of the cost (3x on generated Python, same terms)."""
    return _split_terms(word)


def _split_terms(word: str) -> tuple[str, ...]:
    parts = split_identifier(word)
    if len(parts) > 1:
        return (stem(word), *(stem(p) for p in parts))
    return (stem(word),)


def query_parts(word: str) -> list[str]:
    """What else of a query's word is looked for besides the word: the pieces of an
    identifier, without those that are only digits. The ``10`` of ``zqc10`` or ``utf8``'s
    ``8`` names nothing alone, and searched for it found every file under ``pkg10/`` before
    the one file that had ``zqc10`` in it. A number the query writes as a word of its own
    (``error 404``) stays a word."""
    parts = split_identifier(word)
    return [p for p in parts if not p.isdigit()] if len(parts) > 1 else []


def query_terms(text: str) -> list[str]:
    """The content terms of a query, stemmed, in order, without stop words or repeats."""
    out: list[str] = []
    for word in words(text):
        for piece in [word, *query_parts(word)]:
            lowered = piece.lower()
            if len(lowered) > 1 and lowered not in STOP_WORDS:
                out.append(stem(lowered))
    return list(dict.fromkeys(out))


@functools.lru_cache(maxsize=16384)
def path_terms(path: str) -> frozenset[str]:
    """The terms of a file path's folder and file names (``web_urldispatcher.py`` →
    web, urldispatch, py…)."""
    return frozenset(text_terms(re.sub(r"[/._\-]+", " ", path)))
