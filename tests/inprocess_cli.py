"""`rag-lsp` commands run through :func:`rag_lsp.cli.main` in the test's own process: the same
parsing, output, logging and exit codes as ``python -m rag_lsp``, without a Python start-up
and a model load per command. ``test_cli``'s subprocess tests prove the real process."""

from __future__ import annotations

import io
import logging
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

import pytest

from rag_lsp import workspace
from rag_lsp.cli import main


@dataclass
class Ran:
    """What a user sees of a command: its exit status and what it printed where."""

    returncode: int
    stdout: str
    stderr: str


def rag(*args: str) -> Ran:
    """``rag-lsp ARGS`` as ``python -m rag_lsp`` runs it (``raise SystemExit(main())``)."""
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()  # so main()'s logging.basicConfig takes effect, as in a new process
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: --help, --version, usage errors
                code = exc.code
            if not isinstance(code, int):  # as the interpreter exits with SystemExit(code)
                if code is not None:
                    print(code, file=err)
                code = 0 if code is None else 1
    finally:
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        root.handlers[:] = handlers
        root.setLevel(level)
    return Ran(code, out.getvalue(), err.getvalue())


def share_model(patch: pytest.MonkeyPatch, embedder: Any) -> None:
    """Commands that would load the installed model get the test session's copy (the same
    files); a ``--model-dir`` or ``modelDir`` of their own still loads, or fails, for real."""
    load = workspace.load_embedder

    def shared(settings, root=None, **kwargs):
        model_dir = settings.model_path(root) if root is not None else settings.model_dir
        if model_dir is None and settings.embed_batch_size == embedder.batch_size:
            return embedder, None
        return load(settings, root, **kwargs)

    patch.setattr(workspace, "load_embedder", shared)
