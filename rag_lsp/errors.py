"""Errors the engine raises on purpose. Each message says what is wrong and how to fix it."""

from __future__ import annotations


class RagLspError(Exception):
    """Base class: a user-facing problem with a message that carries the fix."""


class ConfigError(RagLspError):
    """Settings that do not match ``schemas/config.schema.json``."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid settings:\n  " + "\n  ".join(problems))


class ModelNotFoundError(RagLspError):
    """The embedding model files are not where we looked."""


class ModelIntegrityError(RagLspError):
    """Model files exist but do not match the manifest's hashes."""


class IndexMismatchError(RagLspError):
    """The on-disk index was written with another model, dimension or schema."""


class IndexCorruptError(RagLspError):
    """The on-disk index cannot be read."""


class IndexBusyError(RagLspError):
    """Another process is writing (or rebuilding) the index; trying again later works."""

    retryable = True


class IndexMissingError(RagLspError):
    """There is no index to read yet; indexing the workspace makes one."""


class WorkspaceClosedError(RagLspError):
    """The workspace was closed while a write waited its turn."""


class BadInputError(RagLspError):
    """The caller asked for something that cannot be done as asked (the message says what
    to change): an empty query, an unknown mode, an anchor outside the workspace…"""


class DiskFullError(RagLspError):
    """No space left to write the index or knowledge base."""


class IndexNotWritableError(RagLspError):
    """The index or knowledge base folder cannot be written, or read (a read-only mount, its
    permissions): nothing in it is damaged, and once this user has access the call works."""
