// The assistant-mode commands: activate a mode (chat, or the mode's context document where
// there is no chat model) and add the selection to a mode's knowledge base.
import * as vscode from "vscode";
import { clampBudget } from "./budget";
import { reportingErrors } from "./commands";
import { activeFileParam, isFileUri, toLspRange } from "./lspRange";
import { availableModes, DEFAULT_MODE, modeDescription, PARTICIPANT_NAME } from "./modes";
import { MODES, Requests, type ContextResponse, type InjectContextParams, type KbAddParams, type KbAddResponse } from "./protocol";
import { brief } from "./notify";
import { contextDocumentUri, type ReadOnlyDocuments } from "./readOnlyDocuments";
import type { RagServerApi } from "./serverApi";
import { contextSettings, SECTION } from "./settings";

/** The mode last activated in this workspace; the chat participant's default. */
export class ActiveMode {
  private static readonly KEY = "ragLsp.activeMode";
  constructor(private readonly memento: vscode.Memento) {}
  get(): string { return this.memento.get<string>(ActiveMode.KEY) ?? DEFAULT_MODE; }
  async set(mode: string): Promise<void> { await this.memento.update(ActiveMode.KEY, mode); }
}

export async function pickMode(placeHolder: string): Promise<string | undefined> {
  const modes = availableModes(vscode.workspace.getConfiguration(SECTION).get("extraModes"));
  const picked = await vscode.window.showQuickPick(
    modes.map((mode) => ({ label: mode, detail: modeDescription(mode) })), { placeHolder, matchOnDetail: true });
  return picked?.label;
}

/** Opens the chat with the participant and mode; false where there is no chat model to answer. */
async function openChat(mode: string): Promise<boolean> {
  const models = await Promise.resolve(vscode.lm?.selectChatModels()).catch(() => []);
  if (!models?.length) return false;
  const slash = (MODES as readonly string[]).includes(mode) ? ` /${mode}` : ""; // extra modes have no slash command
  try {
    await vscode.commands.executeCommand("workbench.action.chat.open", { query: `@${PARTICIPANT_NAME}${slash} `, isPartialQuery: true });
    return true;
  } catch {
    return false;
  }
}

/** Without a chat model: the packed context in the mode's read-only Markdown document (one per
 * mode: activating it again refreshes the same tab), to copy anywhere. */
async function showContextInEditor(server: RagServerApi, documents: ReadOnlyDocuments, mode: string): Promise<void> {
  const activeFile = activeFileParam(vscode.window.activeTextEditor);
  let query: string | undefined;
  if (!activeFile) {
    query = await vscode.window.showInputBox({ title: `rag-lsp: ${mode} context`, prompt: "What is the context for? (no file is open to derive it from)" });
    if (!query?.trim()) return;
  }
  const params: InjectContextParams = {
    mode, tokenBudget: clampBudget(contextSettings(vscode.workspace.getConfiguration(SECTION)).fallbackBudget),
    ...(query ? { query } : {}), ...(activeFile ? { activeFile } : {}),
  };
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `rag-lsp: gathering ${mode} context…`, cancellable: true },
    (_progress, token) => server.request<ContextResponse>(Requests.injectContext, params, token));
  if (!result.context) {
    void vscode.window.showInformationMessage(brief(`rag-lsp: nothing in the workspace is relevant enough to "${result.query}".`));
    return;
  }
  await documents.show(contextDocumentUri(mode), result.context);
  const summary = `rag-lsp: ${mode} context for "${result.query}": ${result.items.length} items, ` +
    `${result.totalTokens} of ${result.budget} tokens (ragLsp.context.fallbackBudget).`;
  if (await vscode.window.showInformationMessage(brief(summary), "Copy") === "Copy") {
    await vscode.env.clipboard.writeText(result.context);
  }
}

async function activateMode(server: RagServerApi, activeMode: ActiveMode, documents: ReadOnlyDocuments): Promise<void> {
  const mode = await pickMode("Assistant mode: what should the context favour?");
  if (!mode) return;
  await activeMode.set(mode);
  if (!(await openChat(mode))) await showContextInEditor(server, documents, mode);
}

async function addToKnowledgeBase(server: RagServerApi, added: () => void): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const content = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : "";
  if (!editor || !content.trim()) {
    void vscode.window.showWarningMessage("rag-lsp: select the code or notes to remember first.");
    return;
  }
  const mode = await pickMode("Add the selection to which mode's knowledge base?");
  if (!mode) return;
  const firstLine = content.trim().split("\n", 1)[0].slice(0, 80);
  const title = await vscode.window.showInputBox({ title: `rag-lsp: ${mode} knowledge`, prompt: "A title for the entry (optional)", value: firstLine });
  if (title === undefined) return;
  const params: KbAddParams = { mode, content, ...(title.trim() ? { title: title.trim() } : {}) };
  // The anchor lets the server mark the entry stale when this code changes.
  if (isFileUri(editor.document.uri)) params.anchors = [{ uri: editor.document.uri.toString(), range: toLspRange(editor.selection) }];
  await server.request<KbAddResponse>(Requests.kbAdd, params);
  added();
  void vscode.window.showInformationMessage(`rag-lsp: added to the ${mode} knowledge base.`);
}

export interface ModeCommandDeps {
  server: RagServerApi;
  activeMode: ActiveMode;
  documents: ReadOnlyDocuments;
  /** Called after an entry was added (the knowledge view refreshes). */
  knowledgeChanged(): void;
}

export function registerModeCommands({ server, activeMode, documents, knowledgeChanged }: ModeCommandDeps): vscode.Disposable {
  return vscode.Disposable.from(
    vscode.commands.registerCommand("ragLsp.activateMode", reportingErrors(() => activateMode(server, activeMode, documents), server)),
    vscode.commands.registerCommand("ragLsp.addToKnowledgeBase", reportingErrors(() => addToKnowledgeBase(server, knowledgeChanged), server)),
  );
}
