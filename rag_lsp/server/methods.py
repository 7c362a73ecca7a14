"""The custom method names, shared with the clients. ``schemas/protocol/`` describes each one
(a test checks the two agree)."""

RAG_SEARCH = "rag/search"
RAG_STATUS = "rag/status"
RAG_REINDEX = "rag/reindex"
RAG_INDEX_STATUS = "rag/indexStatus"  # server → client notification

REQUESTS = (RAG_SEARCH, RAG_STATUS, RAG_REINDEX)
NOTIFICATIONS = (RAG_INDEX_STATUS,)

# The settings section clients keep our configuration under (`workspace/configuration`).
SETTINGS_SECTION = "ragLsp"
