// Pure helpers that turn a rag/search answer into what the sidebar shows: one group per file,
// its matching ranges best first. No vscode import, so they run anywhere (webview tests too).

import type { Range, SearchResult } from "./protocol";

/** One matching range of a file, as a row the user can open. */
export interface RangeRow {
  range: Range;
  score: number;
  /** "L12–18" (1-based, inclusive). */
  label: string;
}

/** All results of one file. */
export interface ResultGroup {
  uri: string;
  path: string;
  /** The workspace folder's name, set only when results span several folders. */
  folderName: string | null;
  /** Best score of the file. */
  score: number;
  /** Symbol, kind and snippet of the best chunk. */
  symbol: string;
  kind: string;
  snippet: string;
  rows: RangeRow[];
}

/**
 * The 1-based, inclusive lines an LSP range covers (0-based lines, ending at the start of the
 * line after the chunk).
 */
export function lineSpan(range: Range): { first: number; last: number } {
  const first = range.start.line + 1;
  // An end at column 0 of a later line means "up to the end of the line before".
  const last =
    range.end.character === 0 && range.end.line > range.start.line ? range.end.line : range.end.line + 1;
  return { first, last: Math.max(first, last) };
}

/** "L12–18" for an LSP range, "L12" for a single line. */
export function formatRange(range: Range): string {
  const { first, last } = lineSpan(range);
  return last > first ? `L${first}–${last}` : `L${first}`;
}

/** Last segment of a folder URI ("file:///work/repo" → "repo"). */
export function folderName(folderUri: string): string {
  const segments = folderUri.replace(/\/+$/, "").split("/");
  const last = segments[segments.length - 1] || folderUri;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

/** True when an answer for `query` arrives after the user has asked something else. */
export function isStale(query: string, latest: string | undefined): boolean {
  return query !== latest;
}

/**
 * Groups results by file, keeping the engine's order of files (first appearance) and listing
 * each file's ranges best first. `showFolders` defaults to "results come from several folders".
 */
export function groupByFile(results: SearchResult[], showFolders?: boolean): ResultGroup[] {
  const several = showFolders ?? new Set(results.map((r) => r.folder)).size > 1;
  const groups = new Map<string, ResultGroup>();
  for (const result of results) {
    let group = groups.get(result.uri);
    if (!group) {
      group = {
        uri: result.uri,
        path: result.path,
        folderName: several ? folderName(result.folder) : null,
        score: -Infinity,
        symbol: "",
        kind: "",
        snippet: "",
        rows: [],
      };
      groups.set(result.uri, group);
    }
    if (result.score > group.score) {
      Object.assign(group, { score: result.score, symbol: result.symbol, kind: result.kind, snippet: result.snippet });
    }
    const ranges = result.ranges.length > 0 ? result.ranges : [{ range: result.range, score: result.score }];
    for (const { range, score } of ranges) addRow(group.rows, range, score);
  }
  for (const group of groups.values()) group.rows.sort((a, b) => b.score - a.score);
  return [...groups.values()];
}

/** Adds a range once; the same range reported twice keeps its best score. */
function addRow(rows: RangeRow[], range: Range, score: number): void {
  const label = formatRange(range);
  const same = rows.find((row) => sameRange(row.range, range));
  if (same) same.score = Math.max(same.score, score);
  else rows.push({ range, score, label });
}

function sameRange(a: Range, b: Range): boolean {
  return (
    a.start.line === b.start.line &&
    a.start.character === b.start.character &&
    a.end.line === b.end.line &&
    a.end.character === b.end.character
  );
}
