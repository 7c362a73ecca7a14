// The index commands: focus the search view, show the state, rebuild, restart, log.
import * as vscode from "vscode";
import { Requests, type ReindexResponse, type StatusResponse } from "./protocol";
import type { RagServerApi } from "./serverApi";

export const SEARCH_VIEW_ID = "ragLsp.searchView";

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs a command body; a failure becomes one error message instead of a silent rejection. */
export function reportingErrors<A extends unknown[]>(body: (...args: A) => Promise<unknown>) {
  return async (...args: A): Promise<void> => {
    try {
      await body(...args);
    } catch (err) {
      void vscode.window.showErrorMessage(`rag-lsp: ${errorText(err)}`);
    }
  };
}

export async function rebuildIndex(server: RagServerApi): Promise<void> {
  const { started } = await server.request<ReindexResponse>(Requests.reindex, { full: true });
  const what = started.length === 1 ? "the index" : `${started.length} folders' indexes`;
  void vscode.window.showInformationMessage(
    started.length ? `rag-lsp: rebuilding ${what} from scratch; search keeps answering meanwhile.` : "rag-lsp: no workspace folder to index.");
}

/** One paragraph for the user: state, counts, model, and anything wrong with the fix. */
export function describeServerStatus(status: StatusResponse): string {
  const files = status.folders.reduce((sum, folder) => sum + folder.files, 0);
  const chunks = status.folders.reduce((sum, folder) => sum + folder.chunks, 0);
  const folders = status.folders.length === 1 ? "1 folder" : `${status.folders.length} folders`;
  const parts = [`rag-lsp: ${status.state} — ${folders}, ${files.toLocaleString("en-US")} files, ${chunks.toLocaleString("en-US")} chunks.`];
  parts.push(`Model ${status.model.id || "(none)"}${status.model.loaded ? "" : " (not loaded)"}.`);
  const problems = status.folders.filter((folder) => folder.state === "error" && folder.message).map((f) => f.message);
  if (status.degradedReason) parts.push(`Lexical search only: ${status.degradedReason}`);
  parts.push(...problems);
  if (status.settingsProblems.length) parts.push(`Settings ignored: ${status.settingsProblems.join("; ")}`);
  return parts.join(" ");
}

async function showStatus(server: RagServerApi): Promise<void> {
  if (server.state === "stopped") {
    const choice = await vscode.window.showErrorMessage("rag-lsp: the server is not running.", "Restart server", "Show log");
    if (choice === "Restart server") await server.restart();
    if (choice === "Show log") server.showLog();
    return;
  }
  const status = await server.request<StatusResponse>(Requests.status);
  const attention = status.state === "degraded" || status.state === "error" || status.settingsProblems.length > 0;
  const show = attention ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
  const choice = await show(describeServerStatus(status), "Rebuild index", "Show log");
  if (choice === "Rebuild index") await rebuildIndex(server);
  if (choice === "Show log") server.showLog();
}

export function registerIndexCommands(server: RagServerApi): vscode.Disposable {
  return vscode.Disposable.from(
    // Every view gets a "<id>.focus" command, which also opens its container.
    vscode.commands.registerCommand("ragLsp.search", reportingErrors(() => Promise.resolve(vscode.commands.executeCommand(`${SEARCH_VIEW_ID}.focus`)))),
    vscode.commands.registerCommand("ragLsp.rebuildIndex", reportingErrors(() => rebuildIndex(server))),
    vscode.commands.registerCommand("ragLsp.showStatus", reportingErrors(() => showStatus(server))),
    vscode.commands.registerCommand("ragLsp.restartServer", reportingErrors(() => server.restart())),
    vscode.commands.registerCommand("ragLsp.showLog", () => server.showLog()),
  );
}
