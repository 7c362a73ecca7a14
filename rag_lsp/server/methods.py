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

# Mode context and knowledge bases.
RAG_INJECT_CONTEXT = "rag/injectContext"
RAG_KB_ADD = "rag/kb.add"
RAG_KB_SEARCH = "rag/kb.search"
RAG_KB_LIST = "rag/kb.list"
RAG_KB_DELETE = "rag/kb.delete"
RAG_KB_CLEAR = "rag/kb.clear"

REQUESTS += (RAG_INJECT_CONTEXT, RAG_KB_ADD, RAG_KB_SEARCH, RAG_KB_LIST, RAG_KB_DELETE,
             RAG_KB_CLEAR)
