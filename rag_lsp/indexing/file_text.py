"""A file's text as indexing reads it, and saved files drafted by their words.

The indexer and the drafting of saved files read a file the same way (the size limit, binary
and minified files skipped, secrets redacted), so a drafted file holds the text its chunks
will have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rag_lsp.chunking import language_for
from rag_lsp.chunking.long_lines import looks_minified
from rag_lsp.config import Settings
from rag_lsp.indexing.scan import (
    FOLDER,
    FileContent,
    ScannedFile,
    WorkspaceFilter,
    check_path,
    read_text_file,
)
from rag_lsp.indexing.secrets import redact_secrets
from rag_lsp.store.draft import DraftIndex

# Skip reason for code whose lines average over 400 characters (a bundle, one-line data).
MINIFIED = "minified"
# A burst of at most this many changed files is drafted ahead of its update, which waits for
# it (drafting takes 7-8 s per 10 MB: ~0.4 s for 50 files of 10 kB). Of a larger one (a branch
# switch) only what is gone is drafted, which reads nothing; its update drafts its new and
# changed files before it embeds them (see Indexer._draft_ahead).
DRAFT_SAVED_MAX_FILES = 50


def read_for_index(scanned: ScannedFile, settings: Settings) -> tuple[FileContent | str, str]:
    """The file's content, or why it is skipped; and its language."""
    content = read_text_file(scanned.abs_path, settings.max_file_bytes, scanned.root)
    language = language_for(scanned.path)
    if isinstance(content, FileContent) and looks_minified(content.text, language):
        content = MINIFIED  # no structure to find, and many minutes of embedding
    return content, language


def text_to_index(content: FileContent, settings: Settings) -> str:
    return redact_secrets(content.text) if settings.secret_filter else content.text


def draft_saved(draft: DraftIndex, rules: WorkspaceFilter, paths: Iterable[str],
                pause: Callable[[], None] = lambda: None,
                stored_chunks: Callable[[list[str]], dict[str, list[dict]]] | None = None,
                ) -> list[str]:
    """Put these changed paths (workspace-relative or absolute) in ``draft`` as they are now,
    ahead of their update: a file by its words, one that will not be indexed (excluded, too
    large, binary) as nothing, a deleted file or folder as nothing (under it). ``pause()``
    comes before each file read or drafted (searches first). Then, with ``stored_chunks(paths)``
    (their chunks in the index, by path; asked once), each file is drafted again keeping the
    stored chunks whose text it still holds (``DraftIndex.keep_stored``): drafted by its words
    first, a save is found as soon as before, whatever the read of the index waits for. Of a
    burst of more than DRAFT_SAVED_MAX_FILES, only the deleted files and folders. The paths
    drafted (workspace-relative)."""
    rels = sorted({r for r in map(rules.relative, paths) if r})
    reading = len(rels) <= DRAFT_SAVED_MAX_FILES
    drafted = []
    texts: dict[str, tuple[str, str, int]] = {}  # path -> text, language, its entry
    for rel in rels:
        if not reading and (rules.root / rel).exists():
            continue  # (one stat: a branch switch's 1,000 paths take milliseconds)
        pause()
        verdict = check_path(rules, rel)
        if verdict == FOLDER:
            continue  # its files, if any, are found by its update's scan
        content, language = (read_for_index(verdict, rules.settings)
                             if isinstance(verdict, ScannedFile) else (verdict, ""))
        text = text_to_index(content, rules.settings) if isinstance(content, FileContent) else ""
        stamp = draft.add_entry(rel, text, language, saved=True, gone=verdict == "missing")
        if stamp is not None:
            drafted.append(rel)
            if text:
                texts[rel] = (text, language, stamp)
    if texts and stored_chunks is not None:
        pause()
        stored = stored_chunks(sorted(texts))
        for rel, (text, language, stamp) in texts.items():
            if rel in stored:
                pause()
                draft.keep_stored(rel, text, language, stored[rel], stamp)
    return drafted
