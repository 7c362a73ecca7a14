// A RagServerApi for tests: canned answers per method, and a record of every request.
import { EventEmitter, type CancellationToken } from "vscode";
import type { IndexStatus } from "../../src/protocol";
import type { RagServerApi, ServerState } from "../../src/serverApi";

export class FakeServer implements RagServerApi {
  readonly requests: { method: string; params: unknown }[] = [];
  /** The cancellation token of each request (undefined when none was passed), by position. */
  readonly tokens: (CancellationToken | undefined)[] = [];
  readonly statusEmitter = new EventEmitter<IndexStatus>();
  readonly stateEmitter = new EventEmitter<ServerState>();
  readonly onDidChangeStatus = this.statusEmitter.event;
  readonly onDidChangeState = this.stateEmitter.event;
  status: IndexStatus | undefined;
  state: ServerState = "running";
  restarts = 0;
  logShown = 0;

  constructor(private readonly answers: Record<string, unknown | ((params: unknown) => unknown)> = {}) {}

  async request<R>(method: string, params?: unknown, token?: CancellationToken): Promise<R> {
    this.requests.push({ method, params });
    this.tokens.push(token);
    const answer = this.answers[method];
    if (answer instanceof Error) throw answer;
    return (typeof answer === "function" ? answer(params) : answer) as R;
  }

  setStatus(status: IndexStatus): void {
    this.status = status;
    this.statusEmitter.fire(status);
  }

  setState(state: ServerState): void {
    this.state = state;
    this.stateEmitter.fire(state);
  }

  async restart(): Promise<void> { this.restarts++; }
  showLog(): void { this.logShown++; }
  readonly logged: string[] = [];
  log(text: string): void { this.logged.push(text); }
}
