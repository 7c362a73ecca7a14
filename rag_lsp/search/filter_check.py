"""A search's filters as the user meant them, and a word when they leave nothing to search.

A filter that matches no file is silent otherwise: the search says "nothing relevant", and
the user blames the threshold. So the spellings users type are taken as meant (`./src/**`, an
absolute path inside the workspace, `Python`), a language this tool does not know is refused
with the names it knows, and a search that found nothing says when its filters matched no
file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from rag_lsp.chunking.languages import LANGUAGE_BY_EXTENSION, language_for
from rag_lsp.chunking.types import KINDS
from rag_lsp.errors import BadInputError
from rag_lsp.globs import compile_globs
from rag_lsp.search.results import SearchFilters

LANGUAGES = frozenset(LANGUAGE_BY_EXTENSION.values()) | {"text"}


def _relative_glob(glob: str, root: Path) -> str:
    negated, body = (True, glob[1:]) if glob.startswith("!") else (False, glob)
    inside = _inside(body, root)
    if inside is not None:  # an absolute path inside; any other leading / anchors the glob
        body = inside  # to the root, as in a .gitignore
    while body.startswith("./"):
        body = body[2:]
    return ("!" if negated else "") + body


def _inside(body: str, root: Path) -> str | None:
    """``body`` relative to ``root`` when it is an absolute path inside it, typed as the root
    is spelled or through a link to it (its folders before any wildcard are resolved)."""
    if not Path(body).is_absolute():  # (`C:/ws/...` is, on Windows)
        return None
    for base in (root.as_posix().rstrip("/") + "/", root.resolve().as_posix().rstrip("/") + "/"):
        if body.startswith(base):
            return body[len(base):]
    parts = body.split("/")
    literal = next((i for i, part in enumerate(parts) if any(c in part for c in "*?[\\")),
                   len(parts) - 1)  # the folders typed before the first wildcard
    if literal < 2:
        return None
    try:
        folders = Path("/".join(parts[:literal]) or "/").resolve()
        rest = folders.relative_to(root.resolve()).parts
    except (ValueError, OSError, RuntimeError):  # outside, or a loop of links
        return None
    return "/".join([*rest, *parts[literal:]])


def normalised(filters: SearchFilters, root: Path) -> SearchFilters:
    """``filters`` with paths relative to ``root`` and language names in lower case;
    :class:`BadInputError` for a language no file has or a glob that cannot be read."""
    if not (filters.paths or filters.languages or filters.kinds):  # most searches
        return filters
    unknown_kinds = [kind for kind in filters.kinds if kind not in KINDS]
    if unknown_kinds:
        raise BadInputError(f"unknown kind {unknown_kinds[0]!r} in the kind filter; known: "
                            f"{', '.join(KINDS)} (structs, enums, traits and interfaces are "
                            "`class`)")
    if any(not glob.strip() for glob in filters.paths):
        raise BadInputError("an empty path filter matches no file; give a glob relative to the "
                            "workspace root, e.g. `src/**`, or leave the filter out")
    paths = tuple(_relative_glob(g, root) for g in filters.paths)
    compile_globs(paths, "the path filter")
    languages = tuple(name.strip().lower() for name in filters.languages)
    unknown = [name for name in languages if name not in LANGUAGES]
    if unknown:
        raise BadInputError(
            f"unknown language {unknown[0]!r} in the language filter; known: "
            f"{', '.join(sorted(LANGUAGES))}")
    if paths == filters.paths and languages == filters.languages:
        return filters
    return dataclasses.replace(filters, paths=paths, languages=languages)


def nothing_matches(filters: SearchFilters, indexed_paths: Iterable[str],
                    root: Path) -> str | None:
    """A warning when no indexed file of the workspace at ``root`` passes ``filters``' paths
    and languages (named, since a server searching several folders merges their warnings)."""
    if not (filters.paths or filters.languages):
        return None
    spec = compile_globs(filters.paths, "the path filter") if filters.paths else None
    for path in indexed_paths:
        if ((spec is None or spec.match_file(path))
                and (not filters.languages or language_for(path) in filters.languages)):
            return None
    asked = [f"paths {', '.join(filters.paths)}"] if filters.paths else []
    asked += [f"languages {', '.join(filters.languages)}"] if filters.languages else []
    return (f"no indexed file in {root} matches the filters ({'; '.join(asked)}): path "
            "filters are gitignore-style globs relative to the workspace root, e.g. `src/**`")
