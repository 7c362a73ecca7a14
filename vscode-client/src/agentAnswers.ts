// Answers for an agent, in the same words and layout as the Python side's
// (rag_lsp/agents/answers.py and rag_lsp/agents/tools.py), so an agent reads the same thing
// through the VS Code tools as through `rag-lsp mcp`. No vscode import.
//
// A search answer is a list of `path:start-end  symbol (kind)  score` lines, each followed by
// a few numbered lines of code while the cap allows, never whole files. When the cap is
// reached, snippets go first (lowest ranked first), then whole results, and the answer says
// what was left out and how to get it.
import type { ContextResponse, SearchResponse, SearchResult } from "./protocol";

// The share of the budget the server's packer leaves unused (rag_lsp/context/packing.py).
const SAFETY_MARGIN = 0.1;
import { lineSpan } from "./results";
import { pyRepr } from "./toolSchema";

export const CHARS_PER_TOKEN = 4; // a common estimate for code and English across agents' tokenizers
export const MAX_LINE_CHARS = 160; // longer snippet lines are cut (a minified line must not fill the cap)

/** Characters as Python counts them (code points, not UTF-16 units). */
function length(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

export function estimateTokens(text: string): number {
  return Math.ceil(length(text) / CHARS_PER_TOKEN);
}

export function location(path: string, start: number, end: number): string {
  return end !== start ? `${path}:${start}-${end}` : `${path}:${start}`;
}

const plural = (n: number, word: string) => `${n} ${word}${n !== 1 ? "s" : ""}`;

/** The note an answer starts with while the index is still being built. */
export function buildingNote(percentage?: number | null): string {
  const done = typeof percentage === "number" ? ` (${Math.round(percentage)}% so far)` : "";
  return `Note: the index is still being built${done}; results may be incomplete. Search again later for the full picture.`;
}

function resultHeader(result: SearchResult, path: string): string {
  const { first, last } = lineSpan(result.range);
  const what = [result.symbol, result.kind ? `(${result.kind})` : ""].filter(Boolean).join(" ");
  let header = `${location(path, first, last)}  ${what}`.trimEnd() + `  score ${result.score.toFixed(2)}`;
  // ranges[0] is the best chunk, the same as range: the others are "also".
  const more = result.ranges.slice(1, 6).map(({ range }) => {
    const span = lineSpan(range);
    return location("", span.first, span.last).slice(1);
  });
  if (more.length) {
    const extra = result.ranges.length - 1 - more.length;
    header += "\n  also: " + more.join(", ") + (extra > 0 ? ` (+${extra} more)` : "");
  }
  return header;
}

function snippet(result: SearchResult, lines: number): string {
  if (lines <= 0) return "";
  const text = result.snippet.split("\n").filter((line) => line !== "…").slice(0, lines);
  while (text.length && !text[text.length - 1].trim()) text.pop();
  const start = lineSpan(result.range).first;
  const width = String(start + text.length).length;
  return text.map((raw, i) => {
    let line = raw.trimEnd();
    const chars = [...line];
    if (chars.length > MAX_LINE_CHARS) line = chars.slice(0, MAX_LINE_CHARS).join("") + " …";
    return `  ${String(start + i).padStart(width)}  ${line}`;
  }).join("\n");
}

export interface SearchAnswerOptions {
  query: string;
  maxTokens: number;
  snippetLines: number;
  /** Lines before the answer (e.g. the index is still being built). */
  notes?: string[];
  /** How a result's file is named (default: its `path`, relative to its workspace folder). */
  pathOf?: (result: SearchResult) => string;
}

/** The text an agent reads for a rag/search answer (see the file's header). */
export function searchAnswer(response: SearchResponse, options: SearchAnswerOptions): string {
  const { query, maxTokens, snippetLines } = options;
  const pathOf = options.pathOf ?? ((result: SearchResult) => result.path);
  const head = [...(options.notes ?? []), ...response.warnings];
  const results = response.results;
  if (!results.length) {
    head.push(`No relevant code found for ${pyRepr(query)}. Nothing in the workspace answers it well enough ` +
      "(the threshold and answerThreshold settings); try other words or a symbol name.");
    return head.join("\n");
  }
  head.push(`${plural(results.length, "file")} for ${pyRepr(query)}, best first (${response.mode} search, ` +
    `${response.tookMs.toFixed(0)} ms):`);
  let budget = maxTokens - estimateTokens(head.join("\n")) - 30; // room for the last note
  const headers = results.map((result) => resultHeader(result, pathOf(result)));
  let kept = 0;
  for (const header of headers) {
    const cost = estimateTokens(header) + 1;
    if (cost > budget) break;
    budget -= cost;
    kept++;
  }
  const snippets = new Array<string>(kept).fill("");
  let cutSnippets = 0;
  for (let i = 0; i < kept; i++) {
    const code = snippet(results[i], snippetLines);
    if (!code) continue;
    const cost = estimateTokens(code) + 1;
    if (cost <= budget) {
      snippets[i] = code;
      budget -= cost;
    } else {
      cutSnippets++;
    }
  }
  const blocks = headers.slice(0, kept).map((header, i) => [header, snippets[i]].filter(Boolean).join("\n"));
  const leftOut: string[] = [];
  if (cutSnippets) leftOut.push(`the code of ${plural(cutSnippets, "file")}`);
  if (kept < results.length) leftOut.push(plural(results.length - kept, "more file"));
  const tail = leftOut.length
    ? [`(Left out to stay within max_tokens=${maxTokens}: ${leftOut.join(" and ")}; raise max_tokens to see them.)`]
    : [];
  return [head.join("\n"), ...blocks, ...tail].join("\n\n");
}

/** Where a context item is, as the server's packer names it: "path:L12-L20", a path, or "". */
function itemWhere(item: { path: string; range: ContextResponse["items"][number]["range"] }): string {
  if (!item.path) return "";
  if (!item.range) return item.path;
  const { first, last } = lineSpan(item.range);
  return `${item.path}:L${first}-L${last}`;
}

export interface ContextAnswerOptions {
  query: string;
  mode: string;
  notes?: string[];
}

/** The text an agent reads for a rag/injectContext answer: a one-line summary, then the context. */
export function contextAnswer(response: ContextResponse, options: ContextAnswerOptions): string {
  const { query, mode } = options;
  const notes = options.notes ?? [];
  const leftOut = response.dropped.filter((item) => item.reason === "budget");
  if (!response.items.length && leftOut.length) {
    const smallest = Math.min(...leftOut.map((item) => item.tokens));
    const needed = Math.ceil(smallest / (1 - SAFETY_MARGIN)); // the packer keeps a margin free
    return [...notes, `Nothing fits token_budget ${response.budget}: ${leftOut.length} relevant item(s) were found, ` +
      `the smallest ${smallest} tokens; ask again with token_budget ${needed} or more.`].join("\n");
  }
  if (!response.items.length) {
    return [...notes, `Nothing relevant to ${pyRepr(query)} in the workspace or the ${mode} knowledge base.`].join("\n");
  }
  const sources = new Map<string, number>();
  for (const item of response.items) sources.set(item.source, (sources.get(item.source) ?? 0) + 1);
  let summary = `${mode} context for ${pyRepr(query)}: ${response.totalTokens} of ${response.budget} tokens, ` +
    [...sources].map(([source, n]) => `${n} ${source}`).join(", ") + " item(s)";
  if (leftOut.length) {
    summary += `; ${leftOut.length} more did not fit (` +
      leftOut.slice(0, 5).map((item) => itemWhere(item) || item.title).join(", ") + ")";
  }
  return [...notes, summary, "", response.context].join("\n");
}
