// The sidebar page's HTML. Pure (no vscode import) so the browser test serves exactly this.
// Strict CSP: only our stylesheet and our one nonce'd script; no inline styles or handlers.

import { randomBytes } from "crypto";

export interface SidebarHtmlOptions {
  nonce: string;
  /** `webview.cspSource`: the origin our media files are served from. */
  cspSource: string;
  scriptUri: string;
  styleUri: string;
}

/** A fresh random nonce for one page load. */
export function nonce(): string {
  return randomBytes(16).toString("base64url");
}

export function renderSidebarHtml({ nonce, cspSource, scriptUri, styleUri }: SidebarHtmlOptions): string {
  const csp = [
    "default-src 'none'",
    `style-src ${cspSource}`,
    `script-src 'nonce-${nonce}'`,
    `img-src ${cspSource}`,
  ].join("; ");
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="UTF-8">
  <meta http-equiv="Content-Security-Policy" content="${escapeAttr(csp)}">
  <meta name="viewport" content="width=device-width, initial-scale=1.0">
  <link rel="stylesheet" href="${escapeAttr(styleUri)}">
  <title>rag-lsp search</title>
</head>
<body>
  <form id="search-form" class="search" role="search">
    <label for="query" class="visually-hidden">Search the workspace</label>
    <input id="query" type="search" placeholder="Search the workspace" autocomplete="off"
      spellcheck="false" aria-describedby="hint" aria-controls="results">
    <p id="hint" class="visually-hidden">Results appear as you type. Arrow Down moves to the results, Enter opens one, Escape comes back here.</p>
  </form>
  <div id="index" class="index">
    <p id="status" class="status" role="status" aria-live="polite"></p>
    <button id="rebuild" type="button" class="secondary">Rebuild index</button>
  </div>
  <div id="notices" aria-live="polite"></div>
  <p id="summary" class="summary" aria-live="polite"></p>
  <div id="results" class="results" role="listbox" aria-label="Search results"></div>
  <script nonce="${escapeAttr(nonce)}" src="${escapeAttr(scriptUri)}"></script>
</body>
</html>`;
}

function escapeAttr(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
