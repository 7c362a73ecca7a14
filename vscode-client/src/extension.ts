// Entry point: start the server, then wire the status bar, the Results and Knowledge views,
// commands, chat and the agent-mode tools to it.
import * as vscode from "vscode";
import { registerChatParticipant } from "./chat";
import { registerIndexCommands, reportingErrors } from "./commands";
import { registerKnowledgeView } from "./knowledgeTree";
import { registerLanguageModelTools } from "./lmTools";
import { openRange } from "./lspRange";
import { ActiveMode, registerModeCommands } from "./modeCommands";
import type { Range } from "./protocol";
import { ReadOnlyDocuments } from "./readOnlyDocuments";
import { OPEN_RESULT_COMMAND, RESULTS_VIEW_ID, ResultsTree, SHOW_ALL_RANGES_COMMAND } from "./resultsTree";
import { SearchController } from "./searchInput";
import { RagServer } from "./server";
import type { RagServerApi, ServerState } from "./serverApi";
import { SECTION } from "./settings";
import { createStatusBar } from "./statusBar";

/** The Results view's text when the server is not there to answer. */
export function serverStateMessage(state: ServerState): string | undefined {
  if (state === "stopped") return "The rag-lsp server is not running: these results may be out of date. Click the status bar item to restart it or see its log.";
  if (state === "starting") return "The rag-lsp server is starting…";
  return undefined;
}

/** The results view and the search box that fills it. */
function registerSearch(server: RagServerApi): vscode.Disposable {
  const tree = new ResultsTree();
  const search = new SearchController(server, tree);
  const followState = (state: ServerState) => {
    // The views' welcome text (package.json viewsWelcome) depends on this key.
    void vscode.commands.executeCommand("setContext", "ragLsp.serverState", state);
    if (tree.files.length) tree.message = serverStateMessage(state);
  };
  followState(server.state);
  return vscode.Disposable.from(
    tree,
    server.onDidChangeState(followState),
    vscode.commands.registerCommand("ragLsp.search", async () => {
      await vscode.commands.executeCommand(`${RESULTS_VIEW_ID}.focus`); // results show beside the box
      search.open();
    }),
    vscode.commands.registerCommand(OPEN_RESULT_COMMAND, reportingErrors(async (uri: string, range: Range) => { await openRange(uri, range); }, server)),
    vscode.commands.registerCommand(SHOW_ALL_RANGES_COMMAND, (uri: string) => tree.showAll(uri)),
  );
}

let running: RagServer | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const server = new RagServer(context);
  running = server;
  const activeMode = new ActiveMode(context.workspaceState);
  const documents = new ReadOnlyDocuments();
  const knowledge = registerKnowledgeView(server, documents);
  context.subscriptions.push(
    server,
    documents,
    knowledge.disposable,
    createStatusBar(server),
    registerSearch(server),
    registerIndexCommands(server),
    registerModeCommands({ server, activeMode, documents, knowledgeChanged: () => knowledge.tree.refresh() }),
    registerChatParticipant(context, { server, defaultMode: () => activeMode.get() }),
    registerLanguageModelTools(server),
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
