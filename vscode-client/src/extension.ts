// Entry point: start the server, then wire the status bar, sidebar, commands, chat and the
// agent-mode tools to it.
import * as vscode from "vscode";
import { registerChatParticipant } from "./chat";
import { registerIndexCommands, rebuildIndex } from "./commands";
import { registerLanguageModelTools } from "./lmTools";
import { ActiveMode, registerModeCommands } from "./modeCommands";
import { Requests, type SearchResponse } from "./protocol";
import { RagServer } from "./server";
import type { RagServerApi } from "./serverApi";
import { SECTION } from "./settings";
import { SearchViewProvider, type SearchBackend } from "./sidebar";
import { createStatusBar } from "./statusBar";

function searchBackend(server: RagServerApi): SearchBackend {
  return {
    search: (query) => server.request<SearchResponse>(Requests.search, { query }),
    rebuild: () => rebuildIndex(server),
    onStatus: (listener) => server.onDidChangeStatus(listener),
    lastStatus: () => server.status,
  };
}

let running: RagServer | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const server = new RagServer(context);
  running = server;
  const activeMode = new ActiveMode(context.workspaceState);
  context.subscriptions.push(
    server,
    createStatusBar(server),
    registerIndexCommands(server),
    registerModeCommands(server, activeMode),
    registerChatParticipant(context, { server, defaultMode: () => activeMode.get() }),
    registerLanguageModelTools(server),
    vscode.window.registerWebviewViewProvider(SearchViewProvider.viewType, new SearchViewProvider(context.extensionUri, searchBackend(server))),
    // Which executable runs is fixed at start; other settings reach the running server.
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.server`)) void server.restart();
    }),
  );
  // Not awaited: activation must not wait for the model to load; failures are shown by the server.
  void server.start();
}

/** VS Code waits for this promise, so the server gets its shutdown/exit. */
export function deactivate(): Promise<void> | undefined {
  return running?.stop();
}
