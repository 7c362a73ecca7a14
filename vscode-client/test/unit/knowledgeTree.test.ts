// [defect 15] The Knowledge view: browse each mode's entries, open one, delete one, clear a mode.
import { beforeEach, describe, expect, it } from "vitest";
import { registerKnowledgeView, type KnowledgeNode, type KnowledgeTree } from "../../src/knowledgeTree";
import type { KbEntry } from "../../src/protocol";
import { ReadOnlyDocuments } from "../../src/readOnlyDocuments";
import { FakeServer } from "./fakeServer";
import { commands, fake, Uri, workspace } from "./vscode-stub";

const entry = (id: string, extra: Partial<KbEntry> = {}): KbEntry => ({
  id, mode: "debugger", title: `finding ${id}`, content: `content of ${id}`, tags: [], sessionId: null,
  createdAt: "2026-11-20T10:00:00Z", anchors: [], stale: false, staleReason: null, ...extra,
});
const anchored = entry("a1", {
  anchors: [{ uri: "file:///w/repo/a.py", path: "a.py", range: { start: { line: 2, character: 0 }, end: { line: 4, character: 0 } }, sha256: "x" }],
});

let server: FakeServer;
let tree: KnowledgeTree;
let store: Record<string, KbEntry[]>;
beforeEach(() => {
  fake.reset();
  store = { debugger: [anchored, entry("n2")], security: [], performance: [], planning: [] };
  server = new FakeServer({
    "rag/kb.list": (p: unknown) => {
      const entries = store[(p as { mode: string }).mode] ?? [];
      return { entries, total: entries.length };
    },
    "rag/kb.delete": (p: unknown) => {
      const { mode, id } = p as { mode: string; id: string };
      store[mode] = store[mode].filter((e) => e.id !== id);
      return { removed: 1 };
    },
    "rag/kb.clear": (p: unknown) => {
      const { mode } = p as { mode: string };
      const removed = store[mode].length;
      store[mode] = [];
      return { removed };
    },
  });
  tree = registerKnowledgeView(server, new ReadOnlyDocuments()).tree;
});

const modes = async () => (await tree.getChildren()) as Extract<KnowledgeNode, { type: "mode" }>[];

describe("knowledge view", () => {
  it("lists every mode with its number of entries, and the entries under it", async () => {
    const [debuggerMode, security] = await modes();
    expect(tree.getTreeItem(debuggerMode)).toMatchObject({ label: "debugger", description: "2", contextValue: "ragLsp.kbMode" });
    expect(tree.getTreeItem(security)).toMatchObject({ label: "security", description: "empty", collapsibleState: 0 });
    const rows = (await tree.getChildren(debuggerMode)).map((n) => tree.getTreeItem(n));
    expect(rows.map((r) => [r.label, r.description])).toEqual([["finding a1", "2026-11-20 · a.py"], ["finding n2", "2026-11-20"]]);
  });

  it("includes the user's extra modes", async () => {
    fake.state.settings["ragLsp.extraModes"] = ["review"];
    expect((await modes()).map((m) => m.mode)).toEqual(["debugger", "security", "performance", "planning", "review"]);
  });

  it("opens an anchored entry at its code, and another as a read-only document", async () => {
    fake.state.files.set("file:///w/repo/a.py", "a\nb\nc\nd\ne\nf");
    workspace.workspaceFolders = [{ uri: Uri.file("/w/repo"), name: "repo", index: 0 }];
    const [debuggerMode] = await modes();
    const [first, second] = await tree.getChildren(debuggerMode);
    await commands.executeCommand("ragLsp.kb.open", first);
    await commands.executeCommand("ragLsp.kb.open", second);
    const [code, note] = fake.state.shownEditors;
    expect(code.document.uri.toString()).toBe("file:///w/repo/a.py");
    expect(code.selection.start).toMatchObject({ line: 2 });
    expect(note.document.uri.toString()).toBe("rag-lsp:///knowledge/debugger/n2.md");
    expect(note.document.getText()).toContain("# finding n2");
    expect(note.document.getText()).toContain("content of n2");
  });

  it("deletes an entry only after the user confirms", async () => {
    const [debuggerMode] = await modes();
    const [first] = await tree.getChildren(debuggerMode);
    await commands.executeCommand("ragLsp.kb.delete", first); // dialog dismissed
    expect(server.requests.filter((r) => r.method === "rag/kb.delete")).toEqual([]);
    fake.state.answers.push("Delete");
    await commands.executeCommand("ragLsp.kb.delete", first);
    expect(fake.state.messages.at(-1)).toMatchObject({ level: "warning", text: "Delete “finding a1” from the debugger knowledge base?", actions: ["Delete"] });
    expect(server.requests.filter((r) => r.method === "rag/kb.delete").map((r) => r.params)).toEqual([{ mode: "debugger", id: "a1" }]);
    const [after] = await modes();
    expect(after.entries.map((e) => e.id)).toEqual(["n2"]);
  });

  it("clears a mode after confirmation", async () => {
    const [debuggerMode] = await modes();
    fake.state.answers.push("Clear");
    await commands.executeCommand("ragLsp.kb.clearMode", debuggerMode);
    expect(fake.state.messages.at(-1)?.text).toBe("Delete all 2 entries of the debugger knowledge base?");
    expect(server.requests.at(-1)).toEqual({ method: "rag/kb.clear", params: { mode: "debugger" } });
    expect((await modes())[0].total).toBe(0);
  });

  it("shows nothing (the welcome text explains) while the server is not running", async () => {
    server.setState("stopped");
    expect(await tree.getChildren()).toEqual([]);
    expect(server.requests).toEqual([]);
  });

  it("marks a stale entry", async () => {
    store.debugger = [entry("s1", { stale: true, staleReason: "a.py changed" })];
    const [debuggerMode] = await modes();
    const [row] = await tree.getChildren(debuggerMode);
    expect(tree.getTreeItem(row).description).toBe("2026-11-20 · stale");
  });
});
