"""Credentials are redacted before indexing (setting ``secretFilter``, on by default)."""

from __future__ import annotations

import random
import re

import pytest

from rag_lsp.config import Settings
from rag_lsp.context.builder import ContextRequest, Source, build_context
from rag_lsp.indexing import secrets
from rag_lsp.indexing.secrets import REDACTED, redact_secrets
from rag_lsp.workspace import Workspace
from tests.conftest import write_files


@pytest.mark.parametrize(("text", "secret"), [
    ('password = "hunter2hunter2"', "hunter2hunter2"),
    ("DB_PASSWORD=s3cr3tP@ssw0rd", "s3cr3tP@ssw0rd"),
    ('{"client_secret": "9f8e7d6c5b4a39281706"}', "9f8e7d6c5b4a39281706"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("key id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("auth: ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
     "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
     "MIIEpAIBAAKCAQEA"),
])
def test_credentials_are_redacted_and_lines_kept(text, secret):
    redacted = redact_secrets(text)
    assert secret not in redacted and REDACTED in redacted
    assert redacted.count("\n") == text.count("\n")


@pytest.mark.parametrize("code", [
    "def hash_password(password: str) -> str:",
    "token = get_token()",
    "secret = settings.SECRET_KEY",
    'token = os.environ["TOKEN"]',
    "self.token = token",
    'password = "changeme"',
    "api_key = ${API_KEY}",
    "max_tokens = 254",
    "if password == stored_password:",
])
def test_code_and_placeholders_are_left_alone(code):
    assert redact_secrets(code) == code


SECRET_FILES = {
    "config/settings.yaml": """
        database:
          host: db.internal
          user: billing
          password: "Tr0ub4dor&3xyzzy"
        aws_access_key_id: AKIAIOSFODNN7EXAMPLE
        """,
    "src/db.py": '''
        def connect(settings):
            """Open the billing database with the configured password."""
            return Database(settings["host"], settings["user"], settings["password"])
        ''',
}


@pytest.mark.parametrize("enabled", [True, False])
def test_the_index_and_the_context_never_see_a_redacted_secret(tmp_path, embedder, enabled):
    write_files(tmp_path, SECRET_FILES)
    ws = Workspace.open(tmp_path, Settings.from_dict({"secretFilter": enabled}),
                        embedder=embedder)
    ws.index()
    hits = ws.find_chunks("database password for billing", limit=20, threshold=0.0)
    assert any(h.path == "config/settings.yaml" for h in hits)
    stored = "\n".join(h.text for h in hits)
    context = build_context([Source(ws)], ContextRequest(
        mode="security", token_budget=2000, query="database password for billing",
        include_knowledge=False), ws.token_counter).context
    for secret in ("Tr0ub4dor&3xyzzy", "AKIAIOSFODNN7EXAMPLE"):
        assert (secret in stored) is not enabled
        if enabled:
            assert secret not in context
    assert "db.internal" in stored  # the rest of the file is indexed as it is


# ---- the scans that find where a pattern can match -------------------------------------------

def _whole_text_subs(text: str) -> str:
    """What redact_secrets did before its scans: each pattern over the whole text."""
    text = secrets._PRIVATE_KEY.sub(
        lambda m: m.group(1) + re.sub(r"[^\n]+", REDACTED, m.group(2)) + m.group(3), text)
    text = secrets._TOKENS.sub(REDACTED, text)
    return secrets._ASSIGNMENT.sub(secrets._redact_assignment, text)


_KEYS = ["password", "PassWord", "passwd", "pwd", "SECRET_KEY", "secret-key", "api_key",
         "apiKey", "APIKEY", "access_token", "authToken", "token", "client_secret",
         "private_key", "credentials", "keyring", "monkey", "my.password", "db-pwd", "x_token_y",
         "contraseña_password", "ключ_token", "\u212aey_token", "pa\u017f\u017fword",
         "PA\u0130D_token", "\u0130password", "keytoken." * 40 + "pwd"]
_SEPARATORS = [" = ", "=", ": ", ":", " =\n", ":\n\n  ", " == ", " := ", "\t=\t"]
_VALUES = ["hunter22222", "'abcdefgh1234'", '"s3cr3t-value!"', "changeme", "${PASSWORD}",
           "os.environ['X']", "get_pw()", "Optional[str]", "short", "'xxxxxxxxxx'",
           "abc,def,ghi", "tokenvalue_token=password1234", "ñandú_secreto_largo"]
_TOKENS = ["AKIAIOSFODNN7EXAMPLE", "ghp_" + "a" * 36, "github_pat_" + "b" * 40,
           "glpat-" + "c" * 20, "xoxb-" + "1" * 12, "sk_live_" + "d" * 16, "rk_live_" + "e" * 16,
           "AIza" + "f" * 35, "sk-proj-" + "g" * 32,
           "eyJ" + "h" * 10 + ".eyJ" + "i" * 10 + "." + "j" * 10,
           "-----BEGIN EC PRIVATE KEY-----\nabc\ndef\n-----END EC PRIVATE KEY-----"]
_NOISE = ["x", " ", "\n", "'", '"', ".", "-", "_", "(", ")", "[", "]", ",", ";", "{", "}", "a1",
          "def f():", "#", "é", "ñ"]


def test_the_scans_redact_exactly_what_the_patterns_over_the_whole_text_do():
    """Names with key words (ASCII or not, spelt with the letters a case-insensitive pattern
    folds into ASCII ones), quotes, separators over lines, values, tokens and noise, mixed at
    random: the same text as the three patterns run over the whole text."""
    rng = random.Random(15)
    redacted = 0
    for _ in range(10_000):
        parts = []
        for _ in range(rng.randint(1, 8)):
            kind = rng.random()
            if kind < 0.4:
                parts.append(rng.choice(_NOISE))
            elif kind < 0.5:
                parts.append(rng.choice(_TOKENS))
            else:
                parts.append(rng.choice(["", "'", '"', "self.", "x_", "-"]) + rng.choice(_KEYS)
                             + rng.choice(["", "'", '"']) + rng.choice(_SEPARATORS)
                             + rng.choice(_VALUES))
        text = "".join(parts)
        expected = _whole_text_subs(text)
        assert redact_secrets(text) == expected, text
        redacted += expected != text
    assert redacted > 2_500  # the texts hold secrets to redact, not only near misses


def test_every_key_word_and_token_holds_what_its_scan_looks_for():
    for alternative in secrets._KEY_WORDS.split("|"):
        spelt = re.sub(r"\[_\\-\]\?|s\?$", "", alternative)  # api[_\-]?key -> apikey
        assert re.fullmatch(f"(?:{secrets._KEY_WORDS})", spelt), spelt
        assert any(part in spelt.lower() for part in secrets._KEY_PARTS), alternative
    for token in _TOKENS:
        assert _whole_text_subs(token) != token, token
        assert any(mark in token for mark in secrets._TOKEN_MARKS) or \
            secrets._PRIVATE_KEY_MARK in token, token
