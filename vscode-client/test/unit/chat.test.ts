import { beforeEach, describe, expect, it } from "vitest";
import { window, type ChatResult } from "vscode";
import { createChatHandler } from "../../src/chat";
import { composePrompt } from "../../src/modes";
import type { ContextItem, ContextResponse, InjectContextParams } from "../../src/protocol";
import { FakeServer } from "./fakeServer";
import {
  CancellationTokenSource, ChatRequestTurn, ChatResponseMarkdownPart, ChatResponseTurn, fake, LanguageModelChatMessage,
  Location, Position, Selection, Uri, workspace,
} from "./vscode-stub";

const textOf = (value: string | LanguageModelChatMessage) => (typeof value === "string" ? value : value.content.map((p) => p.value).join(""));
/** One token per word, except "HUGE", which the chat model's tokenizer finds expensive. */
const countWords = (text: string) => text.split(/\s+/).filter(Boolean).reduce((n, word) => n + (word === "HUGE" ? 5000 : 1), 0);

function fakeModel(maxInputTokens: number) {
  const sent: LanguageModelChatMessage[][] = [];
  return {
    sent, maxInputTokens,
    async countTokens(value: string | LanguageModelChatMessage) { return countWords(textOf(value)); },
    async sendRequest(messages: LanguageModelChatMessage[]) {
      sent.push(messages);
      return { text: (async function* () { yield "The cause "; yield "is here."; })() };
    },
  };
}

function fakeStream() {
  const out = { markdown: [] as string[], progress: [] as string[], references: [] as unknown[] };
  return { out, markdown: (v: string) => out.markdown.push(v), progress: (v: string) => out.progress.push(v), reference: (v: unknown) => out.references.push(v) };
}

const range = { start: { line: 11, character: 0 }, end: { line: 20, character: 0 } };
const item = (title: string, uri: string | null, itemRange: ContextItem["range"]): ContextItem =>
  ({ source: "codebase", uri, path: title, range: itemRange, title, score: 0.5, tokens: 10 });
const packed: ContextResponse = {
  context: ["### codebase: run (a.py:L12-L20)\n```python a.py:L12-L20\ndef run(): pass\n```",
    "### knowledge: Retry storms\nJobs pile up.",
    "### codebase: big (b.py:L1-L9)\n```python b.py:L1-L9\nHUGE\n```"].join("\n\n"),
  items: [item("run", "file:///work/repo/a.py", range), item("Retry storms", "file:///work/repo/notes.md", null), item("big", "file:///work/repo/b.py", range)],
  totalTokens: 60, budget: 0, dropped: [], query: "why?",
};

async function ask(server: FakeServer, model: ReturnType<typeof fakeModel>, prompt: string, options: { command?: string; history?: unknown[]; references?: unknown[] } = {}) {
  const stream = fakeStream();
  const request = { prompt, command: options.command, references: options.references ?? [], model };
  const handler = createChatHandler({ server, defaultMode: () => "security" });
  const result = await handler(request as never, { history: options.history ?? [] } as never, stream as never, new CancellationTokenSource().token as never);
  return { result: result as ChatResult, out: stream.out };
}

beforeEach(() => {
  fake.reset();
  fake.state.settings["ragLsp.context.reserveTokens"] = 1000;
  workspace.workspaceFolders = [{ uri: Uri.file("/work/repo"), name: "repo", index: 0 }]; // (cited files are its own)
});

describe("@rag chat participant", () => {
  it("sizes the budget, trims what the model's tokenizer finds too long, cites and answers", async () => {
    const server = new FakeServer({ "rag/injectContext": packed });
    const model = fakeModel(4000);
    window.activeTextEditor = fake.editor(Uri.file("/work/repo/a.py"), "x\ny", new Selection(new Position(0, 0), new Position(1, 1))) as never;
    const { result, out } = await ask(server, model, "why do retries pile up?", { command: "debugger" });

    const params = server.requests[0].params as InjectContextParams;
    expect(params).toMatchObject({ mode: "debugger", query: "why do retries pile up?", activeFile: { uri: "file:///work/repo/a.py", selection: { start: { line: 0, character: 0 }, end: { line: 1, character: 1 } } } });
    expect(params.tokenBudget).toBe(4000 - 1000 - countWords(composePrompt("debugger", "", "why do retries pile up?")));

    expect(out.references).toEqual([new Location(Uri.parse("file:///work/repo/a.py"), expect.anything()), Uri.parse("file:///work/repo/notes.md")]);
    const sentText = textOf(model.sent[0][0]);
    expect(sentText).toContain("Jobs pile up.");
    expect(sentText).not.toContain("HUGE");
    expect(sentText).toContain("why do retries pile up?");
    expect(out.markdown.join("")).toBe("The cause is here.");
    expect(result.metadata).toEqual({ mode: "debugger", items: 2 });
  });

  it("uses the active mode without a slash command, and sends and counts the history", async () => {
    const server = new FakeServer({ "rag/injectContext": { ...packed, context: "", items: [] } });
    const model = fakeModel(4000);
    const history = [new ChatRequestTurn("earlier question"), new ChatResponseTurn([new ChatResponseMarkdownPart("earlier answer")])];
    await ask(server, model, "and now?", { history });
    const params = server.requests[0].params as InjectContextParams;
    expect(params.mode).toBe("security");
    expect(params.activeFile).toBeUndefined();
    expect(model.sent[0].map(textOf).slice(0, 2)).toEqual(["earlier question", "earlier answer"]);
    expect(params.tokenBudget).toBe(4000 - 1000 - countWords(composePrompt("security", "", "and now?")) - 4);
  });

  it("passes attached files as manual context", async () => {
    const server = new FakeServer({ "rag/injectContext": { ...packed, context: "", items: [] } });
    const references = [{ id: "file", value: Uri.file("/work/repo/README.md") }, { id: "sel", value: new Location(Uri.file("/work/repo/a.py"), new Selection(new Position(2, 0), new Position(4, 0))) }];
    await ask(server, fakeModel(4000), "plan", { references });
    expect((server.requests[0].params as InjectContextParams).manualContext).toEqual(["file:///work/repo/README.md", { uri: "file:///work/repo/a.py", range: { start: { line: 2, character: 0 }, end: { line: 4, character: 0 } } }]);
  });

  it("says so when the model has no room left for context", async () => {
    const server = new FakeServer();
    const model = fakeModel(1100);
    const { out } = await ask(server, model, "question");
    expect(server.requests).toEqual([]);
    expect(model.sent).toEqual([]);
    expect(out.markdown.join("")).toContain("are left for workspace context");
  });

  it("answers without context when the server cannot give it", async () => {
    const server = new FakeServer({ "rag/injectContext": new Error("rag-lsp is disabled in settings (ragLsp.enabled)") });
    const model = fakeModel(4000);
    const { out } = await ask(server, model, "question");
    expect(out.markdown[0]).toContain("disabled in settings");
    expect(out.references).toEqual([]);
    expect(model.sent).toHaveLength(1);
  });
});
