// The server's custom methods and the shapes the client uses. The names must match the
// `x-method` of each schema in ../schemas/protocol (test/unit/protocol.test.ts checks it).

export const Requests = {
  search: "rag/search",
  status: "rag/status",
  reindex: "rag/reindex",
  injectContext: "rag/injectContext",
  kbAdd: "rag/kb.add",
  kbSearch: "rag/kb.search",
  kbList: "rag/kb.list",
  kbDelete: "rag/kb.delete",
  kbClear: "rag/kb.clear",
} as const;

export const Notifications = {
  indexStatus: "rag/indexStatus",
} as const;

/** The longest `query` the server accepts (maxLength in schemas/protocol). */
export const MAX_QUERY_CHARS = 10000;

export const MODES = ["debugger", "security", "performance", "planning"] as const;

export interface Position { line: number; character: number }
export interface Range { start: Position; end: Position }

/** One matching range of a result, best first; symbol, kind and preview describe its own chunk
 * (servers before 0.1.1 send only range and score). */
export interface ScoredRange {
  range: Range;
  score: number;
  symbol?: string;
  kind?: string;
  preview?: string;
}

export interface SearchResult {
  uri: string;
  path: string;
  folder: string;
  range: Range;
  ranges: ScoredRange[];
  score: number;
  kind: string;
  symbol: string;
  language: string;
  snippet: string;
}

export interface SearchResponse {
  results: SearchResult[];
  tookMs: number;
  partial: boolean;
  mode: "vector" | "lexical" | "hybrid";
  warnings: string[];
  /** Where the search's time went, for the slowest folder (absent when no folder answered). */
  timings?: SearchTimings;
}

export interface SearchTimings {
  engineMs: number;
  queryEmbeddingMs: number;
  vectorMs: number;
  lexicalMs: number;
  rankingMs: number;
}

export type IndexState = "starting" | "indexing" | "ready" | "degraded" | "error" | "disabled";

export interface FolderStatus {
  uri: string;
  state: IndexState;
  files: number;
  chunks: number;
  indexPath: string;
  lastUpdate: string | null;
  message: string;
}

export interface IndexStatus {
  state: IndexState;
  files: number;
  chunks: number;
  message: string;
  folders: FolderStatus[];
  /** 0-100 while a run is under way (averaged over folders); absent or null otherwise. */
  percentage?: number | null;
}

export interface StatusResponse {
  state: IndexState;
  enabled: boolean;
  folders: FolderStatus[];
  model: { id: string; sha256: string; dimension: number; loaded: boolean };
  degradedReason: string | null;
  settingsProblems: string[];
}

export interface ReindexParams { full?: boolean; folder?: string }
export interface ReindexResponse { started: string[] }

export interface InjectContextParams {
  mode: string;
  query?: string;
  activeFile?: { uri: string; selection?: Range };
  manualContext?: (string | { uri: string; range?: Range })[];
  tokenBudget: number;
  includeKnowledge?: boolean;
}

export interface KbAddParams {
  mode: string;
  content: string;
  title?: string;
  tags?: string[];
  sessionId?: string;
  anchors?: { uri: string; range: Range }[];
}
export interface KbAddResponse { id: string; createdAt: string }

export interface KbAnchor { uri: string; path: string; range: Range; sha256: string }

export interface KbEntry {
  id: string;
  mode: string;
  title: string;
  content: string;
  tags: string[];
  sessionId: string | null;
  createdAt: string;
  anchors: KbAnchor[];
  stale: boolean;
  staleReason: string | null;
}

export interface KbListResponse { entries: KbEntry[]; total: number }
export interface KbRemovedResponse { removed: number }

export interface ContextItem {
  source: "manual" | "knowledge" | "codebase";
  uri: string | null;
  path: string;
  range: Range | null;
  title: string;
  score: number | null;
  tokens: number;
}

export interface ContextResponse {
  context: string;
  items: ContextItem[];
  totalTokens: number;
  budget: number;
  dropped: (ContextItem & { reason: "budget" | "duplicate" })[];
  query: string;
}
