// The Results tree: rows, what each row opens, the messages above it, and the search box
// that fills it.
import { beforeEach, describe, expect, it } from "vitest";
import { openRange } from "../../src/lspRange";
import type { Range, SearchResponse, SearchResult } from "../../src/protocol";
import { RANGES_SHOWN, ResultsTree, type ResultNode } from "../../src/resultsTree";
import { SearchController } from "../../src/searchInput";
import { FakeServer } from "./fakeServer";
import { fake, MarkdownString, Uri, workspace, type FakeInputBox, type FakeTreeView } from "./vscode-stub";

const lines = (start: number, endExclusive: number): Range => ({ start: { line: start, character: 0 }, end: { line: endExclusive, character: 0 } });

function result(path: string, ranges: { range: Range; symbol: string; preview: string }[]): SearchResult {
  return {
    uri: `file:///w/repo/${path}`, path, folder: "file:///w/repo", range: ranges[0].range, score: 0.8,
    ranges: ranges.map((r, i) => ({ ...r, score: 0.8 - i / 100, kind: "function" })),
    kind: "function", symbol: ranges[0].symbol, language: "python", snippet: `${ranges[0].preview}\n    body`,
  };
}

const response = (results: SearchResult[], extra: Partial<SearchResponse> = {}): SearchResponse =>
  ({ results, tookMs: 5, partial: false, mode: "hybrid", warnings: [], ...extra });

const client = result("src/http/client.py", [
  { range: lines(40, 60), symbol: "Client.send", preview: "def send(self, request):" },
  { range: lines(10, 20), symbol: "Client.__init__", preview: "def __init__(self, timeout=5):" },
]);

let tree: ResultsTree;
let view: FakeTreeView;
beforeEach(() => {
  fake.reset();
  tree = new ResultsTree();
  view = fake.state.treeViews.get("ragLsp.resultsView")!;
});

const items = (nodes: ResultNode[]) => nodes.map((node) => tree.getTreeItem(node));

describe("results tree", () => {
  it("shows a collapsible row per file with its theme icon, folder and count", () => {
    tree.show("send a request", response([client]), false);
    const [file] = items(tree.getChildren());
    expect(file).toMatchObject({ label: "client.py", description: "src/http · 2", collapsibleState: 2 });
    expect(file.resourceUri?.toString()).toBe("file:///w/repo/src/http/client.py");
    expect(file.accessibilityInformation?.label).toBe("src/http/client.py, 2 ranges");
    expect(view.description).toBe("send a request");
    expect(view.message).toBeUndefined();
  });

  it("[defect 1] gives each range row its own symbol and line, and opens exactly that range", () => {
    tree.show("send a request", response([client]), false);
    const [file] = tree.getChildren();
    const rows = items(tree.getChildren(file));
    expect(rows.map((r) => [r.label, r.description])).toEqual([
      ["Client.send", "L41–60  def send(self, request):"],
      ["Client.__init__", "L11–20  def __init__(self, timeout=5):"],
    ]);
    expect(rows[1].command).toEqual({ command: "ragLsp.openResult", title: "Open", arguments: [client.uri, lines(10, 20)] });
    expect(rows[1].accessibilityInformation?.label).toBe("Client.__init__, lines 11 to 20");
  });

  it("[defect 12] keeps code out of the row: one line each, the snippet in the hover", () => {
    tree.show("send", response([client]), false);
    const [first] = items(tree.getChildren(tree.getChildren()[0]));
    expect(`${first.label} ${first.description}`).not.toContain("\n");
    expect((first.tooltip as MarkdownString).value).toContain("```python\ndef send(self, request):\n    body\n```");
  });

  it("[defect 9] lists a file's first ranges and puts the rest behind one row", () => {
    const many = result("big.py", Array.from({ length: 34 }, (_, i) => ({ range: lines(i * 10, i * 10 + 5), symbol: `f${i}`, preview: `def f${i}():` })));
    tree.show("f", response([many]), false);
    const [file] = tree.getChildren();
    const children = tree.getChildren(file);
    expect(children).toHaveLength(RANGES_SHOWN + 1);
    const more = tree.getTreeItem(children[RANGES_SHOWN]);
    expect(more.label).toBe(`${34 - RANGES_SHOWN} more ranges…`);
    tree.showAll(many.uri);
    expect(tree.getChildren(file)).toHaveLength(34);
  });

  it("[defect 11] says plainly when nothing is relevant", () => {
    tree.show("zxqv banana bread", response([]), false);
    expect(tree.getChildren()).toEqual([]);
    expect(view.message).toMatch(/^No relevant results for “zxqv banana bread”\. Try other words/);
  });

  it("says when the answer comes from a partly built index", () => {
    tree.show("send", response([client], { partial: true }), false);
    expect(view.message).toMatch(/Indexing is under way/);
  });

  it("names each file's folder when results span several", () => {
    tree.show("send", response([client]), true);
    expect(tree.getTreeItem(tree.getChildren()[0]).description).toBe("repo · src/http · 2");
  });
});

describe("openRange", () => {
  const text = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join("\n");
  beforeEach(() => {
    fake.state.files.set("file:///w/repo/a.py", text);
    workspace.workspaceFolders = [{ uri: Uri.file("/w/repo"), name: "repo", index: 0 }];
  });

  it("[defect 1] selects exactly the range's lines, cursor on the first, and shows it", async () => {
    const editor = await openRange("file:///w/repo/a.py", lines(10, 20));
    expect(editor.selection.start).toMatchObject({ line: 10, character: 0 });
    expect(editor.selection.end).toMatchObject({ line: 19, character: "line 20".length });
    expect(editor.selection.active).toMatchObject({ line: 10 });
    expect((fake.state.shownEditors[0] as { revealed?: { start: { line: number } } }).revealed?.start.line).toBe(10);
  });

  it("clamps a range past the end of a file that has shrunk", async () => {
    const editor = await openRange("file:///w/repo/a.py", lines(25, 60));
    expect(editor.selection.end).toMatchObject({ line: 29 });
  });

  it("opens files of the workspace only: another scheme or a path outside is refused", async () => {
    fake.state.files.set("file:///w/elsewhere/b.py", text);
    fake.state.files.set("file:///w/second/c.py", text);
    workspace.workspaceFolders = [...workspace.workspaceFolders!, { uri: Uri.file("/w/second"), name: "second", index: 1 }];
    await openRange("file:///w/second/c.py", lines(1, 2)); // a second folder's file: opened
    fake.state.shownEditors.length = 0;
    for (const uri of ["file:///w/elsewhere/b.py", "file:///w/repo/../elsewhere/b.py", "command:workbench.action.terminal.new", "https://example.com/a.py"]) {
      await expect(openRange(uri, lines(1, 2))).rejects.toThrow(/not a file in the workspace/);
    }
    expect(fake.state.shownEditors).toEqual([]);
  });
});

describe("search box", () => {
  const flush = () => new Promise((r) => setTimeout(r, 0));

  it("[defect 3] opens focused with the last query selected, and fills the tree as you type", async () => {
    const server = new FakeServer({ "rag/search": (params: unknown) => response((params as { query: string }).query === "send" ? [client] : []) });
    const search = new SearchController(server, tree, 0);
    const input = search.open() as unknown as FakeInputBox;
    expect(input.visible).toBe(true);
    input.type("send");
    await new Promise((r) => setTimeout(r, 5));
    await flush();
    expect(server.requests).toEqual([{ method: "rag/search", params: { query: "send" } }]);
    expect(tree.files.map((f) => f.path)).toEqual(["src/http/client.py"]);
    expect(input.prompt).toBe("1 file: Enter to browse them");
    input.accept();
    await new Promise((r) => setTimeout(r, 5));
    expect(input.visible).toBe(false);
    expect(fake.state.executed.map((e) => e.command)).toContain("ragLsp.resultsView.focus");
    expect(view.revealed[0].options).toEqual({ focus: true, select: true });
    const again = search.open();
    expect([again.value, again.valueSelection]).toEqual(["send", [0, 4]]);
  });

  it("drops an answer that arrives after a newer question", async () => {
    const answers: ((r: SearchResponse) => void)[] = [];
    const server = new FakeServer({ "rag/search": () => new Promise((resolve) => answers.push(resolve)) });
    const search = new SearchController(server, tree, 0);
    const first = search.search("sen");
    const second = search.search("send");
    answers[1](response([client]));
    await second;
    answers[0](response([]));
    await first;
    expect(tree.files.map((f) => f.path)).toEqual(["src/http/client.py"]);
  });

  it("shows a failed search above the results and in the box", async () => {
    const server = new FakeServer({ "rag/search": new Error("the rag-lsp server is not running") });
    const note = await new SearchController(server, tree, 0).search("send");
    expect(note).toBe("Search failed: the rag-lsp server is not running");
    expect(view.message).toBe(note);
  });
});

