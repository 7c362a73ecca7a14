"""Credentials are redacted before indexing (setting ``secretFilter``, on by default)."""

from __future__ import annotations

import pytest

from rag_lsp.config import Settings
from rag_lsp.context.builder import ContextRequest, Source, build_context
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
