"""Assistant modes and how each one shapes retrieval.

A mode never admits a chunk the query did not find relevant (the cosine threshold applies to
the query alone); it reorders what was found, adding small, documented boosts to the score:

- debugger: the active file (+0.10) and its folder (+0.05); error-handling code (+0.06:
  ``raise``/``except``/``try``/``catch``/``throw``/``panic``/error logging).
- security: authentication, authorisation, crypto, secrets, input parsing and escaping
  (+0.06 for code that mentions them, +0.04 more for paths such as ``auth/``, ``security/``).
- performance: loops, I/O, caching, batching, concurrency (+0.06); the search's benchmark
  prior does not apply.
- planning: design documents and Markdown (+0.10 for Markdown, +0.06 for ``docs/``,
  ``README``, ``DESIGN``, ``ADR`` paths); the search's docs prior does not apply.
- any other mode (named in the ``extraModes`` setting): no boosts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

import pathspec

from rag_lsp.knowledge.entries import BUILTIN_MODES
from rag_lsp.search.results import ChunkHit

SAME_FILE_BOOST = 0.10
SAME_FOLDER_BOOST = 0.05
SIGNAL_BOOST = 0.06
PATH_BOOST = 0.04


@dataclass(frozen=True)
class ModeProfile:
    name: str
    signals: re.Pattern | None = None  # code that matters in this mode
    paths: tuple[str, ...] = ()  # gitignore-style globs of files that matter
    path_boost: float = PATH_BOOST
    languages: tuple[str, ...] = ()
    language_boost: float = 0.0
    neighbourhood: bool = False  # favour the active file and its folder
    wanted_roles: tuple[str, ...] = ()  # roles whose ranking priors do not apply

    def spec(self) -> pathspec.GitIgnoreSpec | None:
        return pathspec.GitIgnoreSpec.from_lines(self.paths) if self.paths else None


def _words(*words: str) -> re.Pattern:
    return re.compile(r"(?i)\b(?:" + "|".join(words) + r")")


PROFILES: dict[str, ModeProfile] = {
    "debugger": ModeProfile(
        "debugger",
        signals=_words("raise", "except", "try", "catch", "throw", "panic", "error", "traceback",
                       "assert", "log(?:ger)?\\.(?:error|exception|warning)"),
        neighbourhood=True,
    ),
    "security": ModeProfile(
        "security",
        signals=_words("auth", "login", "password", "passwd", "token", "secret", "credential",
                       "crypt", "hash", "hmac", "salt", "cipher", "sign", "verify", "permission",
                       "role", "session", "cookie", "jwt", "oauth", "csrf", "sanitiz", "escape",
                       "validat", "pars", "deserializ", "pickle", "eval", "exec", "sql",
                       "inject", "subprocess", "shell"),
        paths=("**/auth*/**", "**/security/**", "**/*auth*", "**/*crypt*", "**/*secret*"),
    ),
    "performance": ModeProfile(
        "performance",
        signals=_words("for", "while", "loop", "cache", "memo", "lru", "batch", "buffer",
                       "pool", "thread", "async", "await", "concurr", "parallel", "read",
                       "write", "open", "query", "fetch", "request", "socket", "sort",
                       "index", "profil", "latency", "throughput"),
        wanted_roles=("benchmark",),  # a harness shows what is slow and how it is measured
    ),
    "planning": ModeProfile(
        "planning",
        paths=("docs/**", "**/README*", "**/DESIGN*", "**/ADR*", "**/adr/**", "**/*.md"),
        path_boost=0.06,
        languages=("markdown",),
        language_boost=0.10,
        wanted_roles=("docs",),
    ),
}


def valid_modes(extra_modes: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The built-in modes and those named in the ``extraModes`` setting."""
    return (*BUILTIN_MODES, *(m for m in extra_modes if m not in BUILTIN_MODES))


def unknown_mode_message(mode: str, extra_modes: tuple[str, ...] = ()) -> str | None:
    """``None`` for a valid mode, else a message listing the valid ones."""
    valid = valid_modes(extra_modes)
    if mode in valid:
        return None
    return (f"unknown mode {mode!r}; valid modes: {', '.join(valid)} "
            "(add more with the `extraModes` setting)")


def profile_for(mode: str) -> ModeProfile:
    return PROFILES.get(mode, ModeProfile(mode))


def boost(hit: ChunkHit, profile: ModeProfile, active_path: str | None,
          spec: pathspec.GitIgnoreSpec | None) -> float:
    """How much ``profile`` adds to ``hit``'s score (see the module docstring)."""
    extra = 0.0
    if profile.neighbourhood and active_path:
        if hit.path == active_path:
            extra += SAME_FILE_BOOST
        elif PurePosixPath(hit.path).parent == PurePosixPath(active_path).parent:
            extra += SAME_FOLDER_BOOST
    if profile.signals is not None and profile.signals.search(hit.text):
        extra += SIGNAL_BOOST
    if spec is not None and spec.match_file(hit.path):
        extra += profile.path_boost
    if hit.language in profile.languages:
        extra += profile.language_boost
    return extra


def rerank(hits: list[ChunkHit], mode: str, active_path: str | None = None
           ) -> list[tuple[ChunkHit, float]]:
    """``hits`` with their mode-adjusted scores, best first (stable for equal scores)."""
    profile = profile_for(mode)
    spec = profile.spec()
    scored = [(hit, hit.score + boost(hit, profile, active_path, spec)) for hit in hits]
    return sorted(scored, key=lambda pair: pair[1], reverse=True)
