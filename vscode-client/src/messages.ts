// Messages between the sidebar webview and the extension: `{type, ...}` both ways. The webview
// never talks to the server; the extension does, and forwards what the page needs.

import type { IndexStatus, Range, SearchResponse } from "./protocol";
import type { ResultGroup } from "./results";

/** From the webview to the extension. */
export type FromWebview =
  | { type: "ready" }
  | { type: "search"; query: string }
  | { type: "open"; uri: string; range: Range }
  | { type: "rebuild" };

/** From the extension to the webview. */
export type ToWebview =
  /** `groups` is `response.results` grouped by file (src/results.ts), so the page only renders. */
  | { type: "results"; query: string; response: SearchResponse; groups: ResultGroup[] }
  | { type: "error"; query: string; message: string }
  | { type: "status"; status: IndexStatus }
  | { type: "searching"; query: string };
