// The status bar item: the index state the server reports, or the server's own state when it
// is not running. `describeStatus` is pure so each state's text is testable.
import * as vscode from "vscode";
import { indexCounts, plural } from "./commands";
import type { IndexStatus } from "./protocol";
import type { RagServerApi, ServerState } from "./serverApi";

export interface StatusView {
  text: string;
  tooltip: string;
  /** A theme color id for the background, for states that need attention. */
  background?: "statusBarItem.warningBackground" | "statusBarItem.errorBackground";
}


export function describeStatus(server: ServerState, status: IndexStatus | undefined): StatusView {
  if (server === "stopped") {
    return { text: "$(debug-disconnect) rag: stopped", tooltip: "rag-lsp: the server is not running. Click to restart it or see its log.", background: "statusBarItem.errorBackground" };
  }
  if (server === "starting" || !status) {
    return { text: "$(sync~spin) rag: starting", tooltip: "rag-lsp: starting the server" };
  }
  // The run's own progress ("412/1000 files") is labelled, so it is not read as the index size.
  const progress = status.state === "indexing" && status.message ? `This run: ${status.message}` : status.message;
  const lines = [progress, indexCounts(status.folders)].filter(Boolean);
  for (const folder of status.folders.length > 1 ? status.folders : []) {
    lines.push(`${folder.uri.replace(/^file:\/\//, "")}: ${folder.state}, ${plural(folder.files, "file")}`);
  }
  lines.push("Click for details.");
  const tooltip = `rag-lsp: ${lines.join("\n")}`;
  switch (status.state) {
    case "indexing": {
      const percent = typeof status.percentage === "number" ? ` ${Math.round(status.percentage)}%` : "";
      return { text: `$(sync~spin) rag: indexing${percent}`, tooltip };
    }
    case "ready":
      return { text: "$(search) rag: ready", tooltip };
    case "degraded":
      return { text: "$(warning) rag: degraded", tooltip, background: "statusBarItem.warningBackground" };
    case "error":
      return { text: "$(error) rag: error", tooltip, background: "statusBarItem.errorBackground" };
    case "disabled":
      return { text: "$(circle-slash) rag: disabled", tooltip };
    case "starting":
    default:
      return { text: "$(sync~spin) rag: starting", tooltip };
  }
}

/** Keeps one status bar item in step with the server; clicking it runs ragLsp.showStatus. */
export function createStatusBar(server: RagServerApi): vscode.Disposable {
  const item = vscode.window.createStatusBarItem("ragLsp.status", vscode.StatusBarAlignment.Left, 10);
  item.name = "rag-lsp index";
  item.command = "ragLsp.showStatus";
  const update = () => {
    const view = describeStatus(server.state, server.status);
    item.text = view.text;
    item.tooltip = view.tooltip;
    item.backgroundColor = view.background ? new vscode.ThemeColor(view.background) : undefined;
  };
  update();
  item.show();
  return vscode.Disposable.from(item, server.onDidChangeStatus(update), server.onDidChangeState(update));
}
