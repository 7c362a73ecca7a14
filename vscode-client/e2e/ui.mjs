// The UI contract the real-VS-Code test checks, in one place: names, titles and labels the
// user sees. The extension is moving from a webview search sidebar to native tree views;
// `uiEdition` reads which one a build has from its package.json, so the scenario follows the
// extension without edits, and says which contract points a build cannot show yet.

/** The status bar item "rag-lsp index": its text is "$(icon) rag: <state>". */
export const STATUS = {
  any: /^rag: /,
  ready: /^rag: ready\b/,
  /** The first index of the fixture takes seconds once the model is loaded. */
  readyWithinMs: 120_000,
};

/** The activity bar item of the extension's view container. */
export const CONTAINER_TITLE = "rag-lsp";

export const COMMANDS = {
  search: "rag-lsp: Search workspace",
  activateMode: "rag-lsp: Activate assistant mode",
  addToKnowledgeBase: "rag-lsp: Add selection to knowledge base",
  closeAllEditors: "View: Close All Editors",
};

/** Native tree views (the contract). */
export const RESULTS_VIEW = {
  id: "ragLsp.resultsView",
  name: "Results",
  /** A file row: "<relative path>, N ranges". */
  fileRow: (path) => new RegExp(`^${escape(path)}, \\d+ ranges?$`),
  anyFileRow: /^(.+), (\d+) ranges?$/,
  /** A range row: "<symbol or preview>, lines 12 to 18". */
  rangeRow: /^(.+), lines (\d+) to (\d+)$/,
};

export const KNOWLEDGE_VIEW = {
  id: "ragLsp.knowledgeView",
  name: "Knowledge",
  /** A mode row starts with the mode's name. */
  modeRow: (mode) => new RegExp(`^${escape(mode)}\\b`),
  entryRow: (title) => new RegExp(escape(title)),
  deleteCommand: "ragLsp.kb.delete",
  deleteMenuItem: /^Delete/,
  deleteButton: "Delete",
};

/** The webview sidebar (the UI before the tree views). */
export const SEARCH_WEBVIEW = {
  id: "ragLsp.searchView",
  frameTitle: "rag-lsp search",
  input: "#query",
  rows: '#results [role="option"]',
  groupHeaders: "#results .group-header",
};

/** What activating a mode opens when no chat model answers. */
export const CONTEXT_DOCUMENT = {
  /** rag-lsp-context:/<mode>.md, read-only (the contract). */
  tab: (mode) => new RegExp(`^${escape(mode)}\\.md$`),
  /** Before: an untitled Markdown editor, a new one each time (named after its first line; the tab's aria-label has "Untitled-N"). */
  untitledTab: /\bUntitled-\d+\b/,
  askForQuery: /What is the context for\?|context for/i,
};

/** The knowledge-base prompts. */
export const KNOWLEDGE_PROMPTS = {
  pickMode: /knowledge base/i,
  title: /title for the entry|knowledge/i,
  added: (mode) => new RegExp(`added to the ${escape(mode)} knowledge base`),
};

/** A line the extension logs once its language model tools are registered, if it logs one. */
export const LM_TOOLS_LOG = /registered language model tools/i;

/** Which UI a build has, from the package.json inside its .vsix (the one in vscode-client/). */
export function uiEdition(manifest) {
  const views = Object.values(manifest.contributes?.views ?? {}).flat().map((view) => view.id);
  return {
    resultsTree: views.includes(RESULTS_VIEW.id),
    knowledgeTree: views.includes(KNOWLEDGE_VIEW.id),
    searchWebview: views.includes(SEARCH_WEBVIEW.id),
    kbDeleteCommand: (manifest.contributes?.commands ?? []).some((c) => c.command === KNOWLEDGE_VIEW.deleteCommand),
  };
}

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
