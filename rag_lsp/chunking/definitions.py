"""Names a chunk defines, for any language, so a search for ``Router`` can find where it is
defined rather than every place it is used.

Chunks cut by syntax (Python's AST, tree-sitter) carry their symbol, which comes first. To
catch the rest (several definitions in one chunk, languages without a grammar) there is a small,
language-agnostic reading of definition lines: a definition keyword after optional
modifiers (``export``, ``pub``, ``public static``…), then the name — ``class Vitest``,
``func (e *Engine) Use``, ``pub trait Serialize``, ``export const router =``,
``app.listen = function``. It errs towards missing odd forms rather than inventing names.
"""

from __future__ import annotations

import re

_MODIFIERS = (r"(?:(?:export|default|pub(?:\([^)]*\))?|public|private|protected|internal|static"
              r"|abstract|final|async|unsafe|extern|declare|sealed|open|data|inline|override"
              r"|partial|readonly|local)\s+)*")
_NAME = r"([A-Za-z_$][\w$]*)"
_QUALIFIER = r"(?:[A-Za-z_$][\w$]*(?:\.|::))*"
_KEYWORD_DEFINITION = re.compile(
    r"^[ \t]*" + _MODIFIERS
    + r"(?:class|struct|enum|trait|interface|type|func|fn|function\*?|def|module|object"
    + r"|protocol|record|typedef|namespace|union|macro_rules!)\s+"
    + r"(?:\([^)]*\)\s*)?"  # a Go method's receiver
    + _QUALIFIER + _NAME,
    re.MULTILINE,
)
_ASSIGNED_DEFINITION = re.compile(
    r"^[ \t]*" + _MODIFIERS + r"(?:const|let|var|val|static)\s+" + _NAME + r"\s*[:=]",
    re.MULTILINE,
)
_PROPERTY_FUNCTION = re.compile(
    r"^[ \t]*(?:[A-Za-z_$][\w$]*\.)+" + _NAME + r"\s*=\s*(?:async\s+)?function\b", re.MULTILINE
)
_PATTERNS = (_KEYWORD_DEFINITION, _ASSIGNED_DEFINITION, _PROPERTY_FUNCTION)
_PROSE = frozenset({"markdown", "text", "rst", "json", "yaml", "toml", "ini", "xml"})
MAX_NAMES = 32  # a chunk of many one-line constants should not flood the column


def symbol_name(symbol: str) -> str:
    """The name a symbol defines: ``Client.send`` → ``send``, ``impl Serialize for Value``
    → ``Value``, ``M:method`` → ``method``."""
    return re.split(r"[.:\s]", symbol)[-1] if symbol else ""


def defined_names(text: str, language: str, symbol: str = "") -> list[str]:
    """Names defined in ``text``, in order, without repeats (case kept)."""
    names: list[str] = []
    if language in _PROSE:
        return names
    if symbol:  # the chunker's own reading (Python's AST, tree-sitter) comes first
        names.append(symbol_name(symbol))
    for pattern in _PATTERNS:
        names.extend(m.group(1) for m in pattern.finditer(text))
    return list(dict.fromkeys(names))[:MAX_NAMES]
