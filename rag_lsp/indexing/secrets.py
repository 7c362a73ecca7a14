"""Credentials never enter the index: well-known secret shapes are redacted before chunking.

An index (and the context packed from it for an assistant) holds the text of every indexed
file, so a key in ``settings.yaml`` or a token in a test fixture would be embedded, stored and
shown. What is redacted (the value only; the line stays, so line numbers hold):

- private key blocks (``-----BEGIN … PRIVATE KEY-----`` to its ``END`` line);
- tokens with a vendor's fixed shape: AWS access key ids, GitHub, GitLab, Slack, Stripe,
  Google API keys, OpenAI-style ``sk-`` keys, JSON Web Tokens;
- a quoted or bare value assigned to a secret-sounding key (``password``, ``secret``,
  ``api_key``, ``token``, ``client_secret``, ``private_key``, ``credentials``…) when it looks
  like a literal: 8+ characters, no spaces, not a placeholder (``changeme``, ``${VAR}``,
  ``<token>``, ``xxxx``) and not code (a call, an attribute, a type annotation).

Setting ``secretFilter`` (default on) turns it off for a workspace whose "secrets" are test
data someone needs to search for.
"""

from __future__ import annotations

import re
import string

REDACTED = "[REDACTED]"

_PRIVATE_KEY = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(.*?)(-----END [A-Z0-9 ]*PRIVATE KEY-----)",
    re.S)
_TOKENS = re.compile(
    r"\b(?:"
    r"AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36,}"  # GitHub
    r"|github_pat_[A-Za-z0-9_]{40,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|[rs]k_live_[0-9A-Za-z]{16,}"  # Stripe
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google API key
    r"|sk-(?:proj-)?[A-Za-z0-9_\-]{32,}"  # OpenAI-style
    r"|eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"  # JWT
    r")")
_KEY_WORDS = (r"password|passwd|pwd|secret|secret[_\-]?key|api[_\-]?key|apikey|access[_\-]?key"
              r"|access[_\-]?token|auth[_\-]?token|token|client[_\-]?secret|private[_\-]?key"
              r"|credentials?")
# key (maybe quoted) then = or : then a value (maybe quoted) up to the end of the literal.
# The key starts where a name does (the look-behind): tried from every character of every
# name, the lazy scan for a key word cost 15 ms per 10 kB file; same matches, 4x faster
# (checked on 2,137 files: the benchmark repositories and a generated workspace).
_ASSIGNMENT = re.compile(
    rf"""(?ix)
    (?P<key>(?<![\w.\-])["']?[\w.\-]*?(?:{_KEY_WORDS})["']?)   # aws_secret_key, "password"
    (?P<sep>\s*[:=]\s*)
    (?P<quote>["']?)
    (?P<value>[^\s"',;)\]}}]{{8,}})
    (?P=quote)
    """)
_PLACEHOLDER = re.compile(
    r"(?i)^(?:changeme|change_me|password|secret|example|dummy|placeholder|redacted|none|null"
    r"|true|false|x+|\*+|\.+|<.*>|\$\{.*|\{\{.*|%\(.*)$")  # ${VAR}, {{ var }}, %(var)s


def _looks_like_code(value: str) -> bool:
    """``get_password()``, ``settings.SECRET``, ``os.environ[...]``, ``Optional[str]``."""
    return bool(re.search(r"[(\[]", value)) or (
        "." in value and re.fullmatch(r"[A-Za-z_][\w.]*", value) is not None)


def _redact_assignment(match: re.Match) -> str:
    value = match.group("value")
    if _PLACEHOLDER.match(value) or _looks_like_code(value):
        return match.group(0)
    if not match.group("quote") and value.isidentifier():
        return match.group(0)  # ``password: str`` / ``token = token``: a name, not a value
    quote = match.group("quote")
    return f"{match.group('key')}{match.group('sep')}{quote}{REDACTED}{quote}"


def redact_secrets(text: str) -> str:
    """``text`` with credential values replaced by ``[REDACTED]``; line count unchanged."""
    if _PRIVATE_KEY_MARK in text:
        text = _PRIVATE_KEY.sub(
            lambda m: m.group(1) + re.sub(r"[^\n]+", REDACTED, m.group(2)) + m.group(3), text)
    if any(mark in text for mark in _TOKEN_MARKS):
        text = _TOKENS.sub(REDACTED, text)
    return _redact_assignments(text)


# Why the scans below: a regular expression holds Python's interpreter for as long as it
# runs, and the assignment pattern, tried at every name of a file, took ~2 ms per 10 kB file
# (155 ms for the largest file of Python's standard library here). An indexing thread
# redacting a file held up every search's hand-over between threads for that long. Each pass
# below first looks for what every match must contain (plain substring scans), then runs the
# pattern only there, with exactly the matches a whole-text ``sub`` finds (tests compare the
# two; bench/redaction_cost.py times both).

# Every match of _PRIVATE_KEY holds this; every match of _TOKENS one of these (its
# alternatives' fixed parts, case as written: the pattern is case-sensitive).
_PRIVATE_KEY_MARK = "PRIVATE KEY-----"
_TOKEN_MARKS = ("AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox",
                "_live_", "AIza", "sk-", "eyJ")
# Every one of _KEY_WORDS holds one of these, in lower case.
_KEY_PARTS = ("passw", "pwd", "secret", "key", "token", "credential")
# The characters besides ASCII letters that a case-insensitive pattern takes for an ASCII
# letter (İ ı ſ K: i, i, s, k). In a text holding one, a key word may be spelt with it, which
# a search of the lower-cased text for _KEY_PARTS would miss: such a text is scanned whole.
_FOLDED_INTO_ASCII = ("\u0130", "\u0131", "\u017f", "\u212a")
_ASCII_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")
_NAME = re.compile(r"[\w.\-]*")


def _is_name_char(char: str) -> bool:
    """``[\\w.\\-]`` as the patterns read it (``\\w``: a letter or digit of any script, or _)."""
    return char in _ASCII_NAME_CHARS or (char >= "\x80" and char.isalnum())


def _key_name_starts(text: str) -> list[int]:
    """Where each name (a run of ``[\\w.\\-]``) holding a key word starts, in order. A match
    of _ASSIGNMENT starts only there, or on a quote just before one: its key is such a name,
    whose start the look-behind pins (and the lazy scan tries every key word within it)."""
    lowered = text.lower()
    following = {part: lowered.find(part) for part in _KEY_PARTS}  # each part's next hit
    starts: list[int] = []
    while True:
        hits = [at for at in following.values() if at >= 0]
        if not hits:
            return starts
        at = min(hits)
        start = at  # (not before the last name's end: the character there is not a name's)
        while start > 0 and _is_name_char(text[start - 1]):
            start -= 1
        starts.append(start)
        end = _NAME.match(text, at).end()
        for part, next_at in following.items():  # the next hits past this name
            if 0 <= next_at < end:
                following[part] = lowered.find(part, end)


def _redact_assignments(text: str) -> str:
    """``_ASSIGNMENT.sub(_redact_assignment, text)``, trying the pattern only where a key
    name starts: leftmost first, and none inside the match before it, as ``sub`` does."""
    if any(char in text for char in _FOLDED_INTO_ASCII):
        return _ASSIGNMENT.sub(_redact_assignment, text)
    pieces: list[str] = []
    done = 0  # text before this is in pieces
    for start in _key_name_starts(text):
        quoted = start > 0 and text[start - 1] in "\"'"
        for at in (start - 1, start) if quoted else (start,):
            if at < done:
                continue
            match = _ASSIGNMENT.match(text, at)  # (its look-behind sees the text before at)
            if match:
                pieces += (text[done:at], _redact_assignment(match))
                done = match.end()
                break
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)
