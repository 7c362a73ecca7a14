// A RagServerApi for tests: canned answers per method, and a record of every request.
import { EventEmitter } from "vscode";
import type { IndexStatus } from "../../src/protocol";
import type { RagServerApi, ServerState } from "../../src/serverApi";

export class FakeServer implements RagServerApi {
  readonly requests: { method: string; params: unknown }[] = [];
  readonly statusEmitter = new EventEmitter<IndexStatus>();
  readonly stateEmitter = new EventEmitter<ServerState>();
  readonly onDidChangeStatus = this.statusEmitter.event;
  readonly onDidChangeState = this.stateEmitter.event;
  status: IndexStatus | undefined;
  state: ServerState = "running";
  restarts = 0;
  logShown = 0;

  constructor(private readonly answers: Record<string, unknown | ((params: unknown) => unknown)> = {}) {}

  async request<R>(method: string, params?: unknown): Promise<R> {
    this.requests.push({ method, params });
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
}
