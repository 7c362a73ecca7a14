// The index commands: show the state, rebuild, restart, log.
import * as vscode from "vscode";
import { brief, isCut } from "./notify";
import { Requests, type FolderStatus, type ReindexResponse, type StatusResponse } from "./protocol";
import type { RagServerApi } from "./serverApi";

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Shows an error briefly; a long one is written whole to the log, which the message offers. */
export async function showError(text: string, log?: (text: string) => void, ...actions: string[]): Promise<string | undefined> {
  const cut = isCut(text) && log !== undefined;
  if (cut) log(text);
  const offered = cut && !actions.includes("Show log") ? [...actions, "Show log"] : actions;
  return vscode.window.showErrorMessage(brief(text), ...offered);
}

/** Runs a command body; a failure becomes one error message instead of a silent rejection. */
export function reportingErrors<A extends unknown[]>(body: (...args: A) => Promise<unknown>, server?: RagServerApi) {
  return async (...args: A): Promise<void> => {
    try {
      await body(...args);
    } catch (err) {
      const choice = await showError(`rag-lsp: ${errorText(err)}`, server && ((text) => server.log(text)));
      if (choice === "Show log") server?.showLog();
    }
  };
}

/** Asks first (every file is read and embedded again); the current index answers meanwhile. */
export async function rebuildIndex(server: RagServerApi): Promise<void> {
  const choice = await vscode.window.showWarningMessage(
    "Rebuild the rag-lsp index from scratch?",
    { modal: true, detail: "Every file is read and embedded again, which takes minutes on a large workspace. Search keeps answering from the current index until the new one is ready." },
    "Rebuild");
  if (choice !== "Rebuild") return;
  const { started } = await server.request<ReindexResponse>(Requests.reindex, { full: true });
  // Progress shows in the status bar item; only "nothing to do" needs saying.
  if (!started.length) void vscode.window.showInformationMessage("rag-lsp: no workspace folder to index.");
}

/** "1 file", "1,200 files". */
export const plural = (n: number, word: string) => `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;

/** "3 folders, 1,200 files, 9,000 chunks": the index's size, worded the same everywhere. */
export function indexCounts(folders: readonly FolderStatus[]): string {
  const files = folders.reduce((sum, folder) => sum + folder.files, 0);
  const chunks = folders.reduce((sum, folder) => sum + folder.chunks, 0);
  return `${plural(folders.length, "folder")}, ${plural(files, "file")}, ${plural(chunks, "chunk")} indexed`;
}

/** One paragraph for the user: state, counts, model, and anything wrong with the fix. */
export function describeServerStatus(status: StatusResponse): string {
  const parts = [`rag-lsp: ${status.state} — ${indexCounts(status.folders)}.`];
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
  const text = describeServerStatus(status);
  if (isCut(text)) server.log(text);
  const choice = await show(brief(text), "Rebuild index", "Show log");
  if (choice === "Rebuild index") await rebuildIndex(server);
  if (choice === "Show log") server.showLog();
}

export function registerIndexCommands(server: RagServerApi): vscode.Disposable {
  return vscode.Disposable.from(
    // Every view gets a "<id>.focus" command, which also opens its container.
    vscode.commands.registerCommand("ragLsp.rebuildIndex", reportingErrors(() => rebuildIndex(server), server)),
    vscode.commands.registerCommand("ragLsp.showStatus", reportingErrors(() => showStatus(server), server)),
    vscode.commands.registerCommand("ragLsp.restartServer", reportingErrors(() => server.restart(), server)),
    vscode.commands.registerCommand("ragLsp.showLog", () => server.showLog()),
  );
}
