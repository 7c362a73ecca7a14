"""What the server reports about itself: ``rag/status`` and ``rag/indexStatus``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rag_lsp.server.folders import DEGRADED, DISABLED, ERROR, INDEXING, READY, STARTING

if TYPE_CHECKING:
    from rag_lsp.server.state import ServerState

DISABLED_MESSAGE = (
    "rag-lsp is disabled in settings (`ragLsp.enabled` is false); set it to true to index "
    "and search this workspace."
)


def overall_state(server: ServerState) -> str:
    """One state for all folders: the most pressing one."""
    if not server.enabled:
        return DISABLED
    states = {f.state for f in server.folders.values()}
    for state in (INDEXING, ERROR, DEGRADED):
        if state in states:
            return state
    if not server.started or STARTING in states:
        return STARTING
    return READY


def index_status(server: ServerState) -> dict:
    """The ``rag/indexStatus`` notification's params."""
    state = overall_state(server)
    folders = list(server.folders.values())
    if state == DISABLED:
        message = DISABLED_MESSAGE
    else:
        message = next((f.message for f in folders if f.state == state and f.message), "")
    running = [f.percentage for f in folders if f.percentage is not None]
    return {
        "state": state,
        "percentage": round(sum(running) / len(running)) if running else None,
        "files": sum(f.files for f in folders),
        "chunks": sum(f.chunks for f in folders),
        "message": message,
        "folders": [f.status() for f in folders],
    }


def server_status(server: ServerState) -> dict:
    """The ``rag/status`` result."""
    model: Any = server.embedder
    return {
        "state": overall_state(server),
        "enabled": server.enabled,
        "folders": [f.status() for f in server.folders.values()],
        "model": {
            "id": model.model_id if model else "",
            "sha256": model.model_sha256 if model else "",
            "dimension": model.dimension if model else 0,
            "loaded": model is not None,
        },
        "degradedReason": str(server.model_error) if server.model_error else None,
        "settingsProblems": server.settings_problems.all(),
    }
