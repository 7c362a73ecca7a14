"""Shared fixtures. Tests use the real model files and real LanceDB: run `make setup` first."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rag_lsp import memory
from rag_lsp.config import Settings
from rag_lsp.embedding import shared_cache
from rag_lsp.embedding.embedder import OnnxEmbedder
from rag_lsp.embedding.model_files import find_model
from rag_lsp.embedding.tokenizer import ModelTokenCounter
from rag_lsp.workspace import Workspace

# Tables are read as the `rag-lsp` command reads them: LanceDB's read-ahead and scan batches
# capped (Lance reads the first variable once, at its first scan).
memory.cap_lance_read_ahead()
memory.cap_lance_scan_batches()

# The shared embedding cache lives in the user's cache folder: tests never touch the real one.
# Session-scoped fixtures use this folder; each test gets an empty one of its own (below), so
# a test that counts embedded chunks is not served by another test's vectors.
_SESSION_CACHE = tempfile.mkdtemp(prefix="rag-lsp-cache-")
os.environ[shared_cache.CACHE_DIR_ENV] = _SESSION_CACHE
atexit.register(shutil.rmtree, _SESSION_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def own_embedding_cache(tmp_path_factory):
    # Its own MonkeyPatch: a test's `monkeypatch.undo()` must not hand it the shared folder.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(shared_cache.CACHE_DIR_ENV, str(tmp_path_factory.mktemp("user-cache")))
        yield
    shared_cache.close_all()


@pytest.fixture(scope="session")
def model_files():
    return find_model()


@pytest.fixture(scope="session")
def token_counter(model_files) -> ModelTokenCounter:
    return ModelTokenCounter(model_files.tokenizer_path)


@pytest.fixture(scope="session")
def embedder(model_files) -> OnnxEmbedder:
    return OnnxEmbedder(model_files)


SAMPLE_FILES = {
    "src/http/client.py": '''
        """A tiny HTTP client."""

        import urllib.request

        MAX_HOPS = 5


        class TooManyRedirects(Exception):
            """Raised when a response keeps redirecting."""


        def follow_redirects(response, max_hops=MAX_HOPS):
            """Follow 3xx responses to their Location header, at most max_hops times."""
            for _ in range(max_hops):
                if response.status not in (301, 302, 303, 307, 308):
                    return response
                response = urllib.request.urlopen(response.headers["Location"])
            raise TooManyRedirects(max_hops)
        ''',
    "src/auth/passwords.py": '''
        """Password storage."""

        import hashlib
        import os


        def hash_password(password: str) -> str:
            """Hash a password with a random per-user salt using PBKDF2."""
            salt = os.urandom(16)
            digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 200_000)
            return salt.hex() + ":" + digest.hex()


        def verify_password(password: str, stored: str) -> bool:
            """Check a password against the stored salt and digest."""
            salt_hex, digest_hex = stored.split(":")
            digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt_hex),
                                         200_000)
            return digest.hex() == digest_hex
        ''',
    "src/cache/lru.py": '''
        from collections import OrderedDict


        class LRUCache:
            """Keeps the most recently used entries, evicting the oldest when full."""

            def __init__(self, capacity: int):
                self.capacity = capacity
                self.entries = OrderedDict()

            def get(self, key):
                if key not in self.entries:
                    return None
                self.entries.move_to_end(key)
                return self.entries[key]

            def put(self, key, value):
                self.entries[key] = value
                self.entries.move_to_end(key)
                if len(self.entries) > self.capacity:
                    self.entries.popitem(last=False)
        ''',
    "docs/guide.md": """
        # User guide

        This project is a small demo application.

        ## Installation

        Create a virtual environment and install the package with pip.

        ```bash
        # not a heading: a comment in a fence
        pip install -e .
        ```

        ## Deployment

        The service runs in a container behind an nginx reverse proxy.
        """,
    "web/static/app.js": """
        function debounce(fn, ms) {
          let timer;
          return (...args) => {
            clearTimeout(timer);
            timer = setTimeout(() => fn(...args), ms);
          };
        }
        """,
}


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body).lstrip("\n"), encoding="utf-8")


def make_sample_root(base: Path) -> Path:
    """The sample workspace (``SAMPLE_FILES``) in ``base/repo``: the one way tests build it,
    whatever the fixture's scope."""
    root = base / "repo"
    write_files(root, SAMPLE_FILES)
    return root


def indexed_sample(base: Path, embedder: OnnxEmbedder) -> Workspace:
    """The sample workspace, indexed (real model, real LanceDB under ``base``)."""
    ws = Workspace.open(make_sample_root(base), Settings.from_dict({}), embedder=embedder)
    ws.index()
    return ws


@pytest.fixture
def sample_root(tmp_path) -> Path:
    return make_sample_root(tmp_path)


@pytest.fixture
def workspace(tmp_path, embedder) -> Workspace:
    """An indexed sample workspace, for one test."""
    return indexed_sample(tmp_path, embedder)


@contextmanager
def mounted_tmpfs(point: Path, size: str, otherwise: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``"1m"``) at ``point``, a new folder, unmounted after: a small
    disk, or one to remount read-only. Root in a container may mount one; elsewhere the test
    is skipped, saying which test covers the rest (``otherwise``)."""
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); {otherwise}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)
