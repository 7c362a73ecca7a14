// The knowledge bases in a tree: each mode, its entries newest first. An entry opens at the
// code it was written about (its anchor) or as a read-only document; entries can be deleted
// and a mode cleared, each after a confirmation.
import * as vscode from "vscode";
import { reportingErrors } from "./commands";
import { openRange } from "./lspRange";
import { availableModes } from "./modes";
import { visibleBidi } from "./notify";
import { Requests, type KbEntry, type KbListResponse, type KbRemovedResponse } from "./protocol";
import { knowledgeDocumentUri, type ReadOnlyDocuments } from "./readOnlyDocuments";
import type { RagServerApi } from "./serverApi";
import { SECTION } from "./settings";

export const KNOWLEDGE_VIEW_ID = "ragLsp.knowledgeView";
/** Entries listed per mode; the mode's row says how many more there are. */
export const ENTRIES_LISTED = 200;

export type KnowledgeNode =
  | { type: "mode"; mode: string; entries: KbEntry[]; total: number; error?: string }
  | { type: "entry"; mode: string; entry: KbEntry };

export function entryLabel(entry: KbEntry): string {
  return entry.title.trim() || entry.content.trim().split("\n", 1)[0].slice(0, 80) || "(empty entry)";
}

export function modeItem(node: Extract<KnowledgeNode, { type: "mode" }>): vscode.TreeItem {
  const state = node.total ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None;
  const item = new vscode.TreeItem(node.mode, state);
  item.id = `mode:${node.mode}`;
  item.iconPath = new vscode.ThemeIcon("book");
  const more = node.total > node.entries.length ? ` (newest ${node.entries.length} listed)` : "";
  item.description = node.error ? "could not be read" : node.total ? `${node.total}${more}` : "empty";
  item.tooltip = node.error ?? `${node.mode}: ${node.total} entr${node.total === 1 ? "y" : "ies"}`;
  item.contextValue = node.total ? "ragLsp.kbMode" : "ragLsp.kbModeEmpty";
  item.accessibilityInformation = { label: `${node.mode} knowledge base, ${node.total} entr${node.total === 1 ? "y" : "ies"}` };
  return item;
}

export function entryItem(node: Extract<KnowledgeNode, { type: "entry" }>): vscode.TreeItem {
  const { entry } = node;
  const label = visibleBidi(entryLabel(entry));
  const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.None);
  item.id = `entry:${node.mode}:${entry.id}`;
  item.iconPath = new vscode.ThemeIcon(entry.stale ? "warning" : "note");
  const anchor = entry.anchors[0];
  item.description = [entry.createdAt.slice(0, 10), anchor ? visibleBidi(anchor.path) : "", entry.stale ? "stale" : ""].filter(Boolean).join(" · ");
  const tooltip = new vscode.MarkdownString();
  tooltip.appendText(`${label}\n${entry.createdAt}${entry.tags.length ? ` · ${entry.tags.join(", ")}` : ""}`);
  if (entry.stale) tooltip.appendText(`\nStale: ${entry.staleReason ?? "the code it is about has changed"}`);
  tooltip.appendText(`\n\n${entry.content.slice(0, 1000)}`);
  item.tooltip = tooltip;
  item.command = { command: "ragLsp.kb.open", title: "Open", arguments: [node] };
  item.contextValue = "ragLsp.kbEntry";
  item.accessibilityInformation = { label: `${label}, ${node.mode} knowledge${entry.stale ? ", stale" : ""}` };
  return item;
}

/** An entry as a Markdown document, for entries not anchored to code. */
export function entryDocument(entry: KbEntry): string {
  const lines = [`# ${entryLabel(entry)}`, "", `${entry.mode} knowledge · ${entry.createdAt}${entry.tags.length ? ` · ${entry.tags.join(", ")}` : ""}`];
  if (entry.stale) lines.push("", `> Stale: ${entry.staleReason ?? "the code it is about has changed"}`);
  for (const anchor of entry.anchors) lines.push("", `About ${anchor.path}:${anchor.range.start.line + 1}`);
  lines.push("", entry.content);
  return lines.join("\n");
}

export class KnowledgeTree implements vscode.TreeDataProvider<KnowledgeNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<KnowledgeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly view: vscode.TreeView<KnowledgeNode>;

  constructor(private readonly server: RagServerApi) {
    this.view = vscode.window.createTreeView(KNOWLEDGE_VIEW_ID, { treeDataProvider: this, showCollapseAll: true });
  }

  refresh(): void {
    this.changed.fire(undefined);
  }

  getTreeItem(node: KnowledgeNode): vscode.TreeItem {
    return node.type === "mode" ? modeItem(node) : entryItem(node);
  }

  async getChildren(node?: KnowledgeNode): Promise<KnowledgeNode[]> {
    if (node) return node.type === "mode" ? node.entries.map((entry) => ({ type: "entry", mode: node.mode, entry })) : [];
    if (this.server.state !== "running") return []; // the view's welcome text says why
    const modes = availableModes(vscode.workspace.getConfiguration(SECTION).get("extraModes"));
    return Promise.all(modes.map((mode) => this.modeNode(mode)));
  }

  getParent(): undefined {
    return undefined; // entries are found from their mode; reveal is not used
  }

  private async modeNode(mode: string): Promise<KnowledgeNode> {
    try {
      const { entries, total } = await this.server.request<KbListResponse>(Requests.kbList, { mode, limit: ENTRIES_LISTED });
      return { type: "mode", mode, entries, total };
    } catch (err) {
      return { type: "mode", mode, entries: [], total: 0, error: err instanceof Error ? err.message : String(err) };
    }
  }

  dispose(): void {
    this.view.dispose();
    this.changed.dispose();
  }
}

async function openEntry(documents: ReadOnlyDocuments, node: Extract<KnowledgeNode, { type: "entry" }>): Promise<void> {
  const anchor = node.entry.anchors[0];
  if (anchor && !node.entry.stale) {
    await openRange(anchor.uri, anchor.range, { preview: true });
    return;
  }
  await documents.show(knowledgeDocumentUri(node.mode, node.entry.id), entryDocument(node.entry));
}

async function deleteEntry(server: RagServerApi, tree: KnowledgeTree, node: KnowledgeNode | undefined): Promise<void> {
  if (node?.type !== "entry") return;
  const choice = await vscode.window.showWarningMessage(
    `Delete “${entryLabel(node.entry)}” from the ${node.mode} knowledge base?`, { modal: true }, "Delete");
  if (choice !== "Delete") return;
  await server.request<KbRemovedResponse>(Requests.kbDelete, { mode: node.mode, id: node.entry.id });
  tree.refresh();
}

async function clearMode(server: RagServerApi, tree: KnowledgeTree, node: KnowledgeNode | undefined): Promise<void> {
  if (node?.type !== "mode") return;
  const choice = await vscode.window.showWarningMessage(
    `Delete all ${node.total} entries of the ${node.mode} knowledge base?`,
    { modal: true, detail: "This cannot be undone." }, "Clear");
  if (choice !== "Clear") return;
  await server.request<KbRemovedResponse>(Requests.kbClear, { mode: node.mode });
  tree.refresh();
}

export function registerKnowledgeView(server: RagServerApi, documents: ReadOnlyDocuments): { tree: KnowledgeTree; disposable: vscode.Disposable } {
  const tree = new KnowledgeTree(server);
  const disposable = vscode.Disposable.from(
    tree,
    vscode.commands.registerCommand("ragLsp.kb.refresh", () => tree.refresh()),
    vscode.commands.registerCommand("ragLsp.kb.open", reportingErrors((node: Extract<KnowledgeNode, { type: "entry" }>) => openEntry(documents, node))),
    vscode.commands.registerCommand("ragLsp.kb.delete", reportingErrors((node?: KnowledgeNode) => deleteEntry(server, tree, node ?? tree.view.selection[0]))),
    vscode.commands.registerCommand("ragLsp.kb.clearMode", reportingErrors((node?: KnowledgeNode) => clearMode(server, tree, node ?? tree.view.selection[0]))),
    // A restarted server has the same knowledge, but the view may have shown "not running".
    server.onDidChangeState(() => tree.refresh()),
  );
  return { tree, disposable };
}
