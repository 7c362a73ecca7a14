// The sidebar provider's side of the conversation, with the vscode stub and a fake webview.

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type * as vscode from "vscode";
import type { FromWebview, ToWebview } from "../../src/messages";
import type { IndexStatus, SearchResponse } from "../../src/protocol";
import { SearchViewProvider, type SearchBackend } from "../../src/sidebar";
import { EventEmitter, Uri, fake, window } from "./vscode-stub";

const range = { start: { line: 11, character: 0 }, end: { line: 18, character: 0 } };

function response(path: string): SearchResponse {
  const uri = `file:///w/repo/${path}`;
  return {
    results: [{ uri, path, folder: "file:///w/repo", range, ranges: [{ range, score: 0.5 }], score: 0.5,
      kind: "function", symbol: "f", language: "python", snippet: "def f(): ..." }],
    tookMs: 3, partial: false, mode: "hybrid", warnings: [],
  };
}

function status(state: IndexStatus["state"], folders = 1): IndexStatus {
  const folder = { uri: "file:///w/repo", state, files: 1, chunks: 2, indexPath: "/i", lastUpdate: null, message: "" };
  return { state, files: 1, chunks: 2, message: "", folders: Array(folders).fill(folder) };
}

/** A search the test answers (or fails) when it wants, to put answers out of order. */
interface PendingSearch { query: string; resolve(r: SearchResponse): void; reject(e: Error): void }

function fakeBackend() {
  const statuses = new EventEmitter<IndexStatus>();
  const pending: PendingSearch[] = [];
  let last: IndexStatus | undefined;
  const backend: SearchBackend = {
    search: (query) => new Promise((resolve, reject) => pending.push({ query, resolve, reject })),
    rebuild: vi.fn(async () => {}),
    onStatus: (listener) => statuses.event(listener) as unknown as vscode.Disposable,
    lastStatus: () => last,
  };
  const publish = (s: IndexStatus) => { last = s; statuses.fire(s); };
  return { backend, pending, publish };
}

function fakeView() {
  const received = new EventEmitter<FromWebview>();
  const disposed = new EventEmitter<void>();
  const posted: ToWebview[] = [];
  const webview = {
    options: {} as vscode.WebviewOptions,
    html: "",
    cspSource: "https://webview.test",
    asWebviewUri: (uri: Uri) => uri,
    onDidReceiveMessage: received.event,
    postMessage: async (message: ToWebview) => { posted.push(message); return true; },
  };
  const view = { webview, onDidDispose: disposed.event } as unknown as vscode.WebviewView;
  return { view, webview, posted, send: (m: FromWebview) => received.fire(m), dispose: () => disposed.fire() };
}

function setup() {
  const server = fakeBackend();
  const page = fakeView();
  const provider = new SearchViewProvider(Uri.file("/ext") as unknown as vscode.Uri, server.backend);
  provider.resolveWebviewView(page.view);
  return { provider, ...server, ...page };
}

beforeEach(() => fake.reset());
afterEach(() => vi.restoreAllMocks());

describe("SearchViewProvider", () => {
  it("serves a page with a nonce'd script, a strict CSP and media/ as the only resource root", () => {
    const { webview } = setup();
    const nonce = /<script nonce="([^"]+)" src="[^"]+\/media\/sidebar\.js">/.exec(webview.html)?.[1];
    expect(nonce).toMatch(/^[\w-]{16,}$/);
    expect(webview.html).toContain(
      `default-src 'none'; style-src https://webview.test; script-src 'nonce-${nonce}'; img-src https://webview.test`,
    );
    expect(webview.html).not.toMatch(/style="|\son[a-z]+=/);
    expect(webview.options.enableScripts).toBe(true);
    expect(webview.options.localResourceRoots?.map((u) => u.path)).toEqual(["/ext/media"]);
    expect(SearchViewProvider.viewType).toBe("ragLsp.searchView");
  });

  it("answers a search with results grouped by file", async () => {
    const { provider, pending, posted } = setup();
    const done = provider.handle({ type: "search", query: "redirects" });
    pending[0].resolve(response("a.py"));
    await done;
    expect(posted[0]).toEqual({ type: "searching", query: "redirects" });
    expect(posted[1]).toMatchObject({ type: "results", query: "redirects", response: response("a.py") });
    const results = posted[1] as Extract<ToWebview, { type: "results" }>;
    expect(results.groups.map((g) => [g.path, g.rows[0].label])).toEqual([["a.py", "L12–18"]]);
  });

  it("drops answers and errors for queries that are no longer the latest", async () => {
    const { provider, pending, posted } = setup();
    const first = provider.handle({ type: "search", query: "re" });
    const second = provider.handle({ type: "search", query: "redirects" });
    pending[1].resolve(response("new.py"));
    await second;
    pending[0].resolve(response("old.py"));
    await first;
    const third = provider.handle({ type: "search", query: "x" });
    const fourth = provider.handle({ type: "search", query: "xy" });
    pending[2].reject(new Error("late failure"));
    pending[3].resolve(response("xy.py"));
    await Promise.all([third, fourth]);
    const answers = posted.filter((m) => m.type !== "searching");
    expect(answers.map((m) => [m.type, "query" in m && m.query])).toEqual([["results", "redirects"], ["results", "xy"]]);
  });

  it("posts the error of the latest search", async () => {
    const { provider, pending, posted } = setup();
    const done = provider.handle({ type: "search", query: "q" });
    pending[0].reject(new Error("rag/search is disabled in settings"));
    await done;
    expect(posted.at(-1)).toEqual({ type: "error", query: "q", message: "rag/search is disabled in settings" });
  });

  it("names folders in results when the workspace has several", async () => {
    const { provider, pending, posted, publish } = setup();
    publish(status("ready", 2));
    const done = provider.handle({ type: "search", query: "q" });
    pending[0].resolve(response("a.py"));
    await done;
    const results = posted.at(-1) as Extract<ToWebview, { type: "results" }>;
    expect(results.groups[0].folderName).toBe("repo");
  });

  it("opens a result at its range (LSP 0-based)", async () => {
    const { provider } = setup();
    const show = vi.spyOn(window, "showTextDocument");
    await provider.handle({ type: "open", uri: "file:///w/repo/a%20b.py", range });
    const [uri, options] = show.mock.calls[0] as unknown as [Uri, { selection: vscode.Range }];
    expect([uri.scheme, uri.path]).toEqual(["file", "/w/repo/a b.py"]);
    expect(options.selection.start).toMatchObject({ line: 11, character: 0 });
    expect(options.selection.end).toMatchObject({ line: 18, character: 0 });
  });

  it("shows an error when a result cannot be opened", async () => {
    const { provider } = setup();
    vi.spyOn(window, "showTextDocument").mockRejectedValue(new Error("file not found"));
    await provider.handle({ type: "open", uri: "file:///gone.py", range });
    expect(fake.state.messages).toEqual([{ level: "error", text: "rag-lsp: file not found", actions: [] }]);
  });

  it("asks for a rebuild", async () => {
    const { provider, backend } = setup();
    await provider.handle({ type: "rebuild" });
    expect(backend.rebuild).toHaveBeenCalledOnce();
  });

  it("sends the last status when the page is ready, and forwards new ones until disposed", async () => {
    const { provider, publish, posted, send, dispose } = setup();
    await provider.handle({ type: "ready" });
    expect(posted).toEqual([]);
    publish(status("indexing"));
    send({ type: "ready" });
    await Promise.resolve();
    expect(posted.map((m) => m.type === "status" && m.status.state)).toEqual(["indexing", "indexing"]);
    dispose();
    publish(status("ready"));
    expect(posted).toHaveLength(2);
  });
});
