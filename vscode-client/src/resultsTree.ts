// The search results as a native tree, like VS Code's own search view: a row per file (the
// theme's file icon, its folder, how many ranges), under it a row per range with its symbol and
// first line; choosing a range opens exactly its lines. A TreeView rather than a webview: file
// icons, theme colours, keyboard navigation, collapse and screen readers come from the workbench.
import * as vscode from "vscode";
import type { SearchResponse } from "./protocol";
import { plural } from "./commands";
import { visibleBidi } from "./notify";
import { groupByFile, lineSpan, type RangeRow, type ResultGroup } from "./results";

export const RESULTS_VIEW_ID = "ragLsp.resultsView";
export const OPEN_RESULT_COMMAND = "ragLsp.openResult";
export const SHOW_ALL_RANGES_COMMAND = "ragLsp.showAllRanges";
/** Ranges listed per file before a "N more" row: a big file can match in dozens of places. */
export const RANGES_SHOWN = 5;

export type ResultNode =
  | { type: "file"; group: ResultGroup }
  | { type: "range"; group: ResultGroup; row: RangeRow }
  | { type: "more"; group: ResultGroup; hidden: number };

const KIND_ICONS: Record<string, string> = {
  function: "symbol-function",
  method: "symbol-method",
  class: "symbol-class",
  constant: "symbol-constant",
  module: "symbol-module",
  section: "symbol-key",
  text: "symbol-misc",
};

export function fileItem(group: ResultGroup): vscode.TreeItem {
  const uri = vscode.Uri.parse(group.uri);
  const path = visibleBidi(group.path); // (a name holding U+202E would read backwards)
  const slash = path.lastIndexOf("/");
  const name = path.slice(slash + 1);
  const dir = [group.folderName, slash > 0 ? path.slice(0, slash) : ""].filter(Boolean).join(" · ");
  const count = group.rows.length;
  const item = new vscode.TreeItem(name, vscode.TreeItemCollapsibleState.Expanded);
  item.id = group.uri;
  item.resourceUri = uri; // the theme's icon for this file
  item.description = dir ? `${dir} · ${count}` : String(count);
  item.tooltip = `${path}: ${plural(count, "matching range")}, relevance ${group.score.toFixed(2)}`;
  item.contextValue = "ragLsp.resultFile";
  item.accessibilityInformation = { label: `${group.path}, ${plural(count, "range")}` };
  return item;
}

/** "L12–18" for the lines, "L12–18" alone when there is nothing else to say. */
export function rangeLabel(row: RangeRow): { label: string; description: string } {
  if (row.symbol) return { label: row.symbol, description: [row.label, row.preview].filter(Boolean).join("  ") };
  return { label: row.preview || row.label, description: row.preview ? row.label : "" };
}

export function rangeItem(group: ResultGroup, row: RangeRow): vscode.TreeItem {
  const shown = rangeLabel(row);
  const [label, description] = [visibleBidi(shown.label), visibleBidi(shown.description)];
  const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.None);
  item.id = `${group.uri}#${row.label}`;
  item.description = description;
  item.iconPath = new vscode.ThemeIcon(KIND_ICONS[row.kind] ?? "symbol-misc");
  const tooltip = new vscode.MarkdownString();
  tooltip.appendText(`${visibleBidi(group.path)} ${row.label}${row.kind ? ` (${row.kind})` : ""}, relevance ${row.score.toFixed(2)}`);
  const code = row.snippet ?? row.preview;
  if (code) tooltip.appendMarkdown(`\n\n${fence(code, group.language)}`);
  item.tooltip = tooltip;
  item.command = { command: OPEN_RESULT_COMMAND, title: "Open", arguments: [group.uri, row.range] };
  item.contextValue = "ragLsp.resultRange";
  const { first, last } = lineSpan(row.range);
  item.accessibilityInformation = { label: `${label}, ${first === last ? `line ${first}` : `lines ${first} to ${last}`}` };
  return item;
}

/** A Markdown code block that no backtick run inside `code` can close, nor its language
 * (read from the index, which a cloned repository can ship: only a name's characters). */
export function fence(code: string, language: string): string {
  const longest = Math.max(2, ...[...code.matchAll(/`+/g)].map((m) => m[0].length));
  const ticks = "`".repeat(longest + 1);
  return `${ticks}${/^[\w+#.-]*$/.test(language) ? language : ""}\n${code}\n${ticks}`;
}

export class ResultsTree implements vscode.TreeDataProvider<ResultNode>, vscode.Disposable {
  private groups: ResultGroup[] = [];
  private readonly expanded = new Set<string>(); // files whose every range is listed
  private readonly changed = new vscode.EventEmitter<ResultNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly view: vscode.TreeView<ResultNode>;

  constructor() {
    this.view = vscode.window.createTreeView(RESULTS_VIEW_ID, { treeDataProvider: this, showCollapseAll: true });
  }

  /** Shows one search's answer; `severalFolders` names each file's folder. */
  show(query: string, response: SearchResponse, severalFolders: boolean): void {
    this.groups = groupByFile(response.results, severalFolders || undefined);
    this.expanded.clear();
    this.view.description = query;
    this.view.message = resultsMessage(query, response, this.groups.length);
    this.changed.fire(undefined);
  }

  /** A message above the tree (an error, the server's state); the results stay. */
  set message(text: string | undefined) {
    this.view.message = text;
  }

  get files(): readonly ResultGroup[] {
    return this.groups;
  }

  showAll(uri: string): void {
    this.expanded.add(uri);
    this.changed.fire(undefined);
  }

  /** Moves keyboard focus to the first file, for Enter in the search box. */
  async focusFirst(): Promise<void> {
    const first = this.groups[0];
    await vscode.commands.executeCommand(`${RESULTS_VIEW_ID}.focus`);
    if (first) await this.view.reveal({ type: "file", group: first }, { focus: true, select: true });
  }

  getTreeItem(node: ResultNode): vscode.TreeItem {
    switch (node.type) {
      case "file":
        return fileItem(node.group);
      case "range":
        return rangeItem(node.group, node.row);
      case "more": {
        const item = new vscode.TreeItem(`${plural(node.hidden, "more range")}…`);
        item.id = `${node.group.uri}#more`;
        item.command = { command: SHOW_ALL_RANGES_COMMAND, title: "Show all ranges", arguments: [node.group.uri] };
        return item;
      }
    }
  }

  getChildren(node?: ResultNode): ResultNode[] {
    if (!node) return this.groups.map((group) => ({ type: "file", group }));
    if (node.type !== "file") return [];
    const { group } = node;
    const rows = this.expanded.has(group.uri) ? group.rows : group.rows.slice(0, RANGES_SHOWN);
    const children: ResultNode[] = rows.map((row) => ({ type: "range", group, row }));
    const hidden = group.rows.length - rows.length;
    if (hidden > 0) children.push({ type: "more", group, hidden });
    return children;
  }

  getParent(node: ResultNode): ResultNode | undefined {
    return node.type === "file" ? undefined : { type: "file", group: node.group };
  }

  dispose(): void {
    this.view.dispose();
    this.changed.dispose();
  }
}

/** What to say above the results: nothing when there are some and all is well. */
export function resultsMessage(query: string, response: SearchResponse, files: number): string | undefined {
  const notes = response.warnings.length ? ` ${response.warnings.join(" ")}` : "";
  if (files === 0) {
    return `No relevant results for “${query}”. Try other words (a name, or what the code does), or lower ragLsp.threshold and ragLsp.answerThreshold.${notes}`;
  }
  if (response.partial) return `Indexing is under way: results come from the part indexed so far.${notes}`;
  return notes ? notes.trim() : undefined;
}
