"""Stemming is shared by indexing and searches, which run on different threads."""

import threading

import snowballstemmer

from rag_lsp import terms


def test_stem_is_right_from_many_threads_at_once():
    words = [f"{base}{suffix}{i}" for i in range(40)
             for base in ("register", "depend", "connect", "general", "nation")
             for suffix in ("", "ed", "ing", "ations", "ization", "fulness")]
    expected = [snowballstemmer.stemmer("english").stemWord(w) for w in words]
    stem = terms.stem.__wrapped__  # past the cache, to the stemmer itself
    wrong: list[str] = []

    def run() -> None:
        try:
            wrong.extend(w for w, e in zip(words, expected, strict=True) if stem(w) != e)
        except Exception as exc:  # a shared stemmer raised IndexError
            wrong.append(repr(exc))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
