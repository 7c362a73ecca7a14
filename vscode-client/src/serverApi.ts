// What the rest of the extension needs from the running server; src/server.ts implements it
// over the language client, tests implement it with a few lines.
import type * as vscode from "vscode";
import type { IndexStatus } from "./protocol";

/** The client's own view of the server process, beside the index state the server reports. */
export type ServerState = "starting" | "running" | "stopped";

export interface RagServerApi {
  /** A custom request; rejects with the server's message (which names the fix) on error. */
  request<R>(method: string, params?: unknown, token?: vscode.CancellationToken): Promise<R>;
  /** The last rag/indexStatus notification, if one came since the server started. */
  readonly status: IndexStatus | undefined;
  readonly onDidChangeStatus: vscode.Event<IndexStatus>;
  readonly state: ServerState;
  readonly onDidChangeState: vscode.Event<ServerState>;
  restart(): Promise<void>;
  showLog(): void;
  /** Writes a line to the extension's log (the full text of a shortened notification). */
  log(text: string): void;
}
