import { beforeEach, describe, expect, it } from "vitest";
import { commands, window } from "vscode";
import { describeServerStatus, registerIndexCommands } from "../../src/commands";
import { ActiveMode, registerModeCommands } from "../../src/modeCommands";
import type { ContextResponse, StatusResponse } from "../../src/protocol";
import { ReadOnlyDocuments } from "../../src/readOnlyDocuments";
import { FakeServer } from "./fakeServer";
import { fake, Position, Selection, Uri } from "./vscode-stub";

const statusResponse: StatusResponse = {
  state: "degraded", enabled: true,
  folders: [{ uri: "file:///work/repo", state: "degraded", files: 120, chunks: 900, indexPath: "/idx", lastUpdate: null, message: "" }],
  model: { id: "all-MiniLM-L6-v2", sha256: "x", dimension: 384, loaded: false },
  degradedReason: "model.onnx not found; run `rag-lsp model install`", settingsProblems: ["`topK` = 0: must be at least 1"],
};
const contextResponse: ContextResponse = {
  context: "### codebase: run (a.py:L1-L3)\n```python a.py:L1-L3\ndef run(): pass\n```", items: [], totalTokens: 30, budget: 4000, dropped: [], query: "def run",
};

function memento() {
  const store = new Map<string, unknown>();
  return { get: (key: string) => store.get(key), update: async (key: string, value: unknown) => { store.set(key, value); }, keys: () => [...store.keys()] };
}

let server: FakeServer;
let activeMode: ActiveMode;
let knowledgeChanges = 0;
beforeEach(() => {
  fake.reset();
  server = new FakeServer({ "rag/status": statusResponse, "rag/reindex": { started: ["file:///work/repo"] }, "rag/injectContext": contextResponse, "rag/kb.add": { id: "k1", createdAt: "2026-01-01T00:00:00Z" } });
  activeMode = new ActiveMode(memento());
  registerIndexCommands(server);
  knowledgeChanges = 0;
  registerModeCommands({ server, activeMode, documents: new ReadOnlyDocuments(), knowledgeChanged: () => knowledgeChanges++ });
});

describe("index commands", () => {
  it("describes the status with what is wrong and how to fix it", () => {
    const text = describeServerStatus(statusResponse);
    expect(text).toContain("degraded — 1 folder, 120 files, 900 chunks indexed");
    expect(text).toContain("(not loaded)");
    expect(text).toContain("rag-lsp model install");
    expect(text).toContain("`topK` = 0");
  });

  it("shows the status and rebuilds from scratch on request", async () => {
    fake.state.answers.push("Rebuild index", "Rebuild");
    await commands.executeCommand("ragLsp.showStatus");
    expect(fake.state.messages[0]).toMatchObject({ level: "warning", actions: ["Rebuild index", "Show log"] });
    expect(server.requests.map((r) => [r.method, r.params])).toEqual([["rag/status", undefined], ["rag/reindex", { full: true }]]);
  });

  it("offers a restart when the server is not running", async () => {
    server.setState("stopped");
    fake.state.answers.push("Restart server");
    await commands.executeCommand("ragLsp.showStatus");
    expect(server.restarts).toBe(1);
    expect(server.requests).toEqual([]);
  });

  it("shows a failed request as one error message", async () => {
    server = new FakeServer({ "rag/reindex": new Error("rag-lsp is disabled in settings") });
    registerIndexCommands(server);
    fake.state.answers.push("Rebuild");
    await commands.executeCommand("ragLsp.rebuildIndex");
    expect(fake.state.messages.at(-1)).toEqual({ level: "error", text: "rag-lsp: rag-lsp is disabled in settings", actions: [] });
  });

  it("[defect 2] asks before rebuilding, does nothing when declined, and claims nothing afterwards", async () => {
    await commands.executeCommand("ragLsp.rebuildIndex"); // the user closes the dialog
    expect(fake.state.messages).toEqual([{ level: "warning", text: "Rebuild the rag-lsp index from scratch?", actions: ["Rebuild"] }]);
    expect(server.requests).toEqual([]);
    fake.state.answers.push("Rebuild");
    await commands.executeCommand("ragLsp.rebuildIndex");
    expect(server.requests).toEqual([{ method: "rag/reindex", params: { full: true } }]);
    expect(fake.state.messages).toHaveLength(2); // the confirmations; progress is the status bar's
  });

  it("[defect 8] shortens a long error to a few sentences and puts the whole of it in the log", async () => {
    const long = "the index at /work/repo/.rag-lsp could not be opened. " + "detail ".repeat(200);
    server = new FakeServer({ "rag/status": new Error(long) });
    registerIndexCommands(server);
    fake.state.answers.push("Show log");
    await commands.executeCommand("ragLsp.showStatus");
    const [shown] = fake.state.messages;
    expect(shown.text).toBe("rag-lsp: the index at /work/repo/.rag-lsp could not be opened. …");
    expect(shown.actions).toEqual(["Show log"]);
    expect(server.logged).toEqual([`rag-lsp: ${long}`]);
    expect(server.logShown).toBe(1);
  });

  it("[defect 8] keeps a status with many problems short", async () => {
    const problems = Array.from({ length: 30 }, (_, i) => `\`rank${i}\` = -1: must be at least 0`);
    server = new FakeServer({ "rag/status": { ...statusResponse, settingsProblems: problems } });
    registerIndexCommands(server);
    await commands.executeCommand("ragLsp.showStatus");
    expect(fake.state.messages[0].text.length).toBeLessThanOrEqual(240);
    expect(server.logged[0]).toContain("`rank29` = -1");
  });
});

describe("activate mode", () => {
  it("opens the chat with @rag and the mode when a chat model is there", async () => {
    fake.state.chatModels = [{ id: "gpt" }];
    fake.state.answers.push("performance");
    await commands.executeCommand("ragLsp.activateMode");
    expect(activeMode.get()).toBe("performance");
    expect(fake.state.executed).toContainEqual({ command: "workbench.action.chat.open", args: [{ query: "@rag /performance ", isPartialQuery: true }] });
    expect(server.requests).toEqual([]);
  });

  it("offers extra modes, which have no slash command", async () => {
    fake.state.settings["ragLsp.extraModes"] = ["review"];
    fake.state.chatModels = [{ id: "gpt" }];
    fake.state.answers.push("review");
    await commands.executeCommand("ragLsp.activateMode");
    expect(fake.state.executed).toContainEqual({ command: "workbench.action.chat.open", args: [{ query: "@rag ", isPartialQuery: true }] });
  });

  it("[defect 15] without a chat model, shows the context in one document per mode and copies it", async () => {
    fake.state.settings["ragLsp.context.fallbackBudget"] = 3000;
    window.activeTextEditor = fake.editor(Uri.file("/work/repo/a.py"), "def run(): pass", new Selection(new Position(0, 4), new Position(0, 7))) as never;
    fake.state.answers.push("debugger", "Copy");
    await commands.executeCommand("ragLsp.activateMode");
    expect(server.requests[0]).toEqual({ method: "rag/injectContext", params: {
      mode: "debugger", tokenBudget: 3000, activeFile: { uri: "file:///work/repo/a.py", selection: { start: { line: 0, character: 4 }, end: { line: 0, character: 7 } } },
    } });
    const [editor] = fake.state.shownEditors;
    expect(editor.document.uri.toString()).toBe("rag-lsp:///context/debugger.md");
    expect(editor.document.getText()).toBe(contextResponse.context);
    expect(fake.state.clipboard).toBe(contextResponse.context);
    // Again: the same document, not a second Untitled one.
    fake.state.answers.push("debugger");
    await commands.executeCommand("ragLsp.activateMode");
    expect(fake.state.shownEditors.map((e) => e.document.uri.toString())).toEqual(["rag-lsp:///context/debugger.md", "rag-lsp:///context/debugger.md"]);
    expect(fake.state.openedDocuments).toEqual([]);
  });

  it("asks what the context is for when no file is open", async () => {
    fake.state.answers.push("planning", "next steps for the queue");
    await commands.executeCommand("ragLsp.activateMode");
    expect(server.requests[0].params).toEqual({ mode: "planning", tokenBudget: 4000, query: "next steps for the queue" });
  });

  it("does nothing when the pick is cancelled", async () => {
    await commands.executeCommand("ragLsp.activateMode");
    expect(server.requests).toEqual([]);
    expect(activeMode.get()).toBe("planning");
  });
});

describe("add to knowledge base", () => {
  it("adds the selection with its mode, title and anchor", async () => {
    window.activeTextEditor = fake.editor(Uri.file("/work/repo/a.py"), "x = 1\nretry(x)\ny", new Selection(new Position(1, 0), new Position(2, 0))) as never;
    fake.state.answers.push("debugger", "Retries pile up");
    await commands.executeCommand("ragLsp.addToKnowledgeBase");
    expect(server.requests).toEqual([{ method: "rag/kb.add", params: {
      mode: "debugger", content: "retry(x)\n", title: "Retries pile up",
      anchors: [{ uri: "file:///work/repo/a.py", range: { start: { line: 1, character: 0 }, end: { line: 2, character: 0 } } }],
    } }]);
    expect(fake.state.messages.at(-1)?.text).toBe("rag-lsp: added to the debugger knowledge base.");
    expect(knowledgeChanges).toBe(1); // the Knowledge view shows it
  });

  it("leaves out an empty title and the anchor of an unsaved document", async () => {
    window.activeTextEditor = fake.editor(Uri.parse("untitled:Untitled-1"), "a note", new Selection(new Position(0, 0), new Position(0, 6))) as never;
    fake.state.answers.push("security", "");
    await commands.executeCommand("ragLsp.addToKnowledgeBase");
    expect(server.requests[0].params).toEqual({ mode: "security", content: "a note" });
  });

  it("asks for a selection first", async () => {
    window.activeTextEditor = fake.editor(Uri.file("/work/repo/a.py"), "x") as never;
    await commands.executeCommand("ragLsp.addToKnowledgeBase");
    expect(fake.state.messages[0]).toMatchObject({ level: "warning" });
    expect(server.requests).toEqual([]);
  });
});
