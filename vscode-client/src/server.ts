// Starts `rag-lsp serve` with vscode-languageclient and keeps it running: restarts it after a
// crash (within limits), forwards rag/indexStatus, and explains failures with their fix.
import * as vscode from "vscode";
import { LanguageClient, MessageType, ResponseError, ShowMessageNotification, State, TransportKind, type ServerOptions, type ShowMessageParams, type StaticFeature } from "vscode-languageclient/node";
import { clientOptions, ReportingErrorHandler } from "./clientOptions";
import { findExecutable } from "./executable";
import { brief, NOTIFICATION_MAX_CHARS, unlinked } from "./notify";
import { Notifications, type IndexStatus } from "./protocol";
import { decideOnCrash, gaveUpMessage } from "./restartPolicy";
import type { RagServerApi, ServerState } from "./serverApi";
import { resolveServerCommand, SECTION, type ServerCommand } from "./settings";

export class RagServer implements RagServerApi, vscode.Disposable {
  private client: LanguageClient | undefined;
  /** The client whose start succeeded: only its connection closing counts as a crash. */
  private runningClient: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  private crashes: number[] = [];
  private readonly output = vscode.window.createOutputChannel("rag-lsp", { log: true });
  private readonly statusEmitter = new vscode.EventEmitter<IndexStatus>();
  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  readonly onDidChangeStatus = this.statusEmitter.event;
  readonly onDidChangeState = this.stateEmitter.event;
  status: IndexStatus | undefined;
  state: ServerState = "stopped";

  constructor(private readonly context: vscode.ExtensionContext) {}

  start(): Promise<void> {
    this.starting ??= this.startClient().finally(() => { this.starting = undefined; });
    return this.starting;
  }

  async stop(): Promise<void> {
    await this.starting; // stop what an in-flight start starts, rather than race it
    const client = this.client;
    this.client = this.runningClient = undefined;
    await client?.dispose().catch(() => undefined); // stops the process too
    this.setState("stopped");
  }

  /** A restart the user asked for: crash history starts afresh. */
  async restart(): Promise<void> {
    this.crashes = [];
    await this.stop();
    await this.start();
  }

  async request<R>(method: string, params?: unknown, token?: vscode.CancellationToken): Promise<R> {
    await this.starting;
    const client = this.client;
    if (!client || !client.isRunning()) {
      throw new Error("the rag-lsp server is not running; see 'rag-lsp: Show log', then 'rag-lsp: Restart server'");
    }
    try {
      // vscode-jsonrpc takes any argument but a real token as params (undefined and null
      // become [null]), and pygls drops a request without params: "no params" goes as {}.
      const body = params ?? {};
      return await (token ? client.sendRequest<R>(method, body, token) : client.sendRequest<R>(method, body));
    } catch (err) {
      throw err instanceof ResponseError ? new Error(err.message) : err;
    }
  }

  showLog(): void {
    this.output.show(true);
  }

  log(text: string): void {
    this.output.info(text);
  }

  dispose(): void {
    void this.stop();
    this.output.dispose();
    this.statusEmitter.dispose();
    this.stateEmitter.dispose();
  }

  private async startClient(): Promise<void> {
    const command = resolveServerCommand(vscode.workspace.getConfiguration(SECTION), vscode.workspace.getConfiguration("python"), {
      workspaceFolder: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
      trusted: vscode.workspace.isTrusted,
    });
    const shown = [command.command, ...command.args].join(" ");
    this.setState("starting");
    this.output.info(`starting ${shown} (from ${command.source})`);
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    if (!findExecutable(command.command, process.env, cwd)) {
      this.setState("stopped");
      void this.explainStartFailure(command, `${command.command} was not found or is not executable`);
      return;
    }
    let client: LanguageClient | undefined;
    let failure = "the server exited while starting (the log says why)";
    try {
      client = this.createClient(command, cwd);
      this.client = client;
      await client.start();
    } catch (err) {
      failure = err instanceof Error ? err.message : String(err);
    }
    // start() can also resolve without a running server when the process exits early.
    if (!client?.isRunning()) {
      if (this.client === client) this.client = undefined;
      void client?.dispose().catch(() => undefined);
      this.setState("stopped");
      void this.explainStartFailure(command, failure);
      return;
    }
    this.runningClient = client;
    this.setState("running");
  }

  private createClient(command: ServerCommand, cwd: string | undefined): LanguageClient {
    const serverOptions: ServerOptions = { command: command.command, args: command.args, transport: TransportKind.stdio, options: { cwd } };
    let client: LanguageClient | undefined = undefined;
    const options = clientOptions({
      client: () => client,
      storagePath: () => this.context.storageUri?.fsPath,
      outputChannel: this.output,
      errorHandler: new ReportingErrorHandler(() => void this.connectionClosed(client)),
    });
    client = new RagLanguageClient("ragLsp", "rag-lsp", serverOptions, options);
    client.registerFeature(NO_WORK_DONE_PROGRESS);
    client.onNotification(ShowMessageNotification.type, showServerMessage); // (replaces the client's own)
    client.onNotification(Notifications.indexStatus, (status: IndexStatus) => {
      this.status = status;
      this.statusEmitter.fire(status);
    });
    const self = client;
    client.onDidChangeState(({ newState }) => {
      if (this.client === self) this.setState(newState === State.Running ? "running" : newState === State.Starting ? "starting" : "stopped");
    });
    return client;
  }

  /** The server process went away. A start failure is explained by startClient; a crash of a
   * running server is restarted unless it keeps happening. */
  private async connectionClosed(client: LanguageClient | undefined): Promise<void> {
    if (!client || client !== this.runningClient) return;
    this.client = this.runningClient = undefined;
    // Once the client has finished handling the close it is stopped, and dispose() is quiet.
    setTimeout(() => void client.dispose().catch(() => undefined), 0);
    this.setState("stopped");
    const decision = decideOnCrash(this.crashes, Date.now());
    this.crashes = decision.crashes;
    if (decision.restart) {
      this.output.warn(`the server stopped unexpectedly; restarting (${decision.crashes.length} in the last minutes)`);
      await this.start();
      return;
    }
    const choice = await vscode.window.showErrorMessage(gaveUpMessage(), "Show log", "Restart server");
    if (choice === "Show log") this.showLog();
    if (choice === "Restart server") await this.restart();
  }

  private setState(state: ServerState): void {
    if (state !== "running") this.status = undefined; // a new process reports afresh
    if (state === this.state) return;
    this.state = state;
    this.stateEmitter.fire(state);
  }

  private async explainStartFailure(command: ServerCommand, reason: string): Promise<void> {
    const shown = [command.command, ...command.args].join(" ");
    this.output.error(`could not start ${shown}: ${reason}`);
    const fix = command.source === "PATH"
      ? "Set ragLsp.server.command to the rag-lsp program (in a checkout: .venv/bin/rag-lsp, after `make demo`)."
      : `Check ${command.source}: the program must exist and have rag-lsp installed.`;
    this.output.error(fix);
    // The fix is never cut: a long path or reason is (both are whole in the log).
    const what = brief(`rag-lsp: could not start \`${shown}\`: ${reason}.`, NOTIFICATION_MAX_CHARS - fix.length - 1);
    const choice = await vscode.window.showErrorMessage(`${what} ${fix}`, "Show log", "Open settings");
    if (choice === "Open settings") await openServerSettings();
    if (choice === "Show log") this.showLog();
  }
}

/** The server's pop-ups, as vscode-languageclient shows them but with links disarmed: they
 * quote workspace text (an unknown settings key in a cloned repository's .rag-lsp.json), and
 * VS Code runs `[label](command:…)` in a notification as a command when clicked. */
function showServerMessage({ type, message }: ShowMessageParams): void {
  const text = unlinked(message);
  if (type === MessageType.Error) void vscode.window.showErrorMessage(text);
  else if (type === MessageType.Warning) void vscode.window.showWarningMessage(text);
  else void vscode.window.showInformationMessage(text);
}

/** vscode-languageclient pops up a notification for each of its own errors: a server that
 * cannot start gave three ("couldn't create connection", "connection is erroring" twice) on top
 * of RagServer's one message that says what to fix. Its errors go to the log only; RagServer
 * explains start failures and crashes. It also logs every exit of the server process as an
 * error, even the clean exit (code 0) that ends a stop or restart the user asked for. */
class RagLanguageClient extends LanguageClient {
  override error(message: string, data?: unknown): void {
    if (message === "Server process exited with code 0.") this.info(message, data, false);
    else super.error(message, data, false);
  }
}

/**
 * The server reports indexing in rag/indexStatus, which the status bar item shows. Without this
 * the client would also show the server's $/progress as a second status bar item (one that
 * can outlive the run it describes), so the client tells the server it does not take them.
 */
export const NO_WORK_DONE_PROGRESS: StaticFeature = {
  fillClientCapabilities(capabilities) {
    if (capabilities.window) capabilities.window.workDoneProgress = false;
  },
  initialize() {},
  getState: () => ({ kind: "static" }),
  clear() {},
};

/**
 * The settings that choose the server. They are machine-scoped, which a remote window (and
 * code-server) lists under Remote, not User: searching the User tab would show nothing.
 */
export async function openServerSettings(): Promise<void> {
  const command = vscode.env.remoteName ? "workbench.action.openRemoteSettings" : "workbench.action.openSettings";
  await vscode.commands.executeCommand(command, `@ext:rag-lsp.rag-lsp ${SECTION}.server`);
}
