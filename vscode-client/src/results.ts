// Pure helpers that turn a rag/search answer into what the results tree shows: one group per
// file, its matching ranges in the server's order. No vscode import, so they test anywhere.

import type { Range, SearchResult } from "./protocol";

/** One matching range of a file, as a row the user can open. Everything on the row describes
 * this range's own chunk, never the file's best one. */
export interface RangeRow {
  range: Range;
  score: number;
  /** "L12–18" (1-based, inclusive). */
  label: string;
  symbol: string;
  kind: string;
  /** The range's first non-blank line ("" from servers that do not send it). */
  preview: string;
  /** The chunk's opening lines: the server sends them for the file's best range only. */
  snippet?: string;
}

/** All results of one file. */
export interface ResultGroup {
  uri: string;
  path: string;
  /** The workspace folder's name, set only when results span several folders. */
  folderName: string | null;
  /** Best score of the file. */
  score: number;
  language: string;
  /** In the server's order: best first, by the score shown. */
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
 * Groups results by file, keeping the engine's order of files (first appearance) and of each
 * file's ranges. `showFolders` defaults to "results come from several folders".
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
        score: result.score,
        language: result.language,
        rows: [],
      };
      groups.set(result.uri, group);
    }
    group.score = Math.max(group.score, result.score);
    const ranges = result.ranges.length > 0 ? result.ranges : [{ range: result.range, score: result.score }];
    for (const scored of ranges) {
      // The result's own symbol and snippet belong to its primary range, and to no other.
      const primary = sameRange(scored.range, result.range);
      addRow(group.rows, {
        range: scored.range,
        score: scored.score,
        label: formatRange(scored.range),
        symbol: scored.symbol ?? (primary ? result.symbol : ""),
        kind: scored.kind ?? (primary ? result.kind : ""),
        preview: scored.preview ?? (primary ? firstLine(result.snippet) : ""),
        ...(primary && result.snippet ? { snippet: result.snippet } : {}),
      });
    }
  }
  return [...groups.values()];
}

/** Adds a range once; the same range reported twice keeps its best score. */
function addRow(rows: RangeRow[], row: RangeRow): void {
  const same = rows.find((existing) => sameRange(existing.range, row.range));
  if (!same) rows.push(row);
  else same.score = Math.max(same.score, row.score);
}

function firstLine(text: string): string {
  return text.split("\n").map((line) => line.trim()).find(Boolean) ?? "";
}

export function sameRange(a: Range, b: Range): boolean {
  return (
    a.start.line === b.start.line &&
    a.start.character === b.start.character &&
    a.end.line === b.end.line &&
    a.end.character === b.end.character
  );
}
