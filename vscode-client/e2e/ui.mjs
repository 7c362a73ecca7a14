// The UI contract the real-VS-Code test checks, in one place: the names, titles and labels a
// user sees (and a screen reader reads). When the extension's UI changes, this file changes.

/** The status bar item "rag-lsp index": its text is "$(icon) rag: <state>". */
export const STATUS = {
  any: /^rag: /,
  ready: /^rag: ready\b/,
  bad: /^rag: (stopped|error|degraded)\b/,
  /** How long a bad state may last (a crash is restarted) before the test stops waiting. */
  badForMs: 10_000,
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

/** The Results view: native tree rows, labelled for screen readers. */
export const RESULTS_VIEW = {
  id: "ragLsp.resultsView",
  name: "Results",
  /** A file row: "<relative path>, N ranges". */
  fileRow: (path) => new RegExp(`^${escape(path)}, \\d+ ranges?$`),
  anyFileRow: /^(.+), (\d+) ranges?$/,
  /** A range row: "<symbol or preview>, lines 12 to 18" (or "…, line 12"). */
  rangeRow: /^(.+), lines? (\d+)(?: to (\d+))?$/,
};

export const KNOWLEDGE_VIEW = {
  id: "ragLsp.knowledgeView",
  name: "Knowledge",
  /** A mode row starts with the mode's name. */
  modeRow: (mode) => new RegExp(`^${escape(mode)}\\b`),
  entryRow: (title) => new RegExp(escape(title)),
  /** The title of ragLsp.kb.delete, the entry's inline action (its aria-label). */
  deleteActionTitle: "Delete knowledge entry",
  /** The modal's button. */
  deleteButton: "Delete",
};

/** What activating a mode opens when no chat model answers. */
export const CONTEXT_DOCUMENT = {
  pickMode: /Assistant mode/,
  /** A read-only Markdown document named after the mode, one per mode. */
  tab: (mode) => new RegExp(`^${escape(mode)}\\.md$`),
  /** Asked when no file is open to derive the query from. */
  askForQuery: /What is the context for\?/,
  /** The notification shown once the document is open. */
  summary: (mode) => new RegExp(`${escape(mode)} context for`),
};

/** The knowledge-base prompts. */
export const KNOWLEDGE_PROMPTS = {
  pickMode: /which mode's knowledge base/i,
  title: /title for the entry/i,
  added: (mode) => new RegExp(`added to the ${escape(mode)} knowledge base`),
};

/** The views the scenario needs that a manifest (package.json) does not contribute. */
export function missingViews(manifest) {
  const views = Object.values(manifest.contributes?.views ?? {}).flat().map((view) => view.id);
  return [RESULTS_VIEW.id, KNOWLEDGE_VIEW.id].filter((id) => !views.includes(id));
}

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
