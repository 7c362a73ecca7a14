// The agent-mode tools: manifest against schemas/agent-tools.json, arguments to the server's
// requests, answers in the Python side's words (fixtures/agent-answers.json is written by
// rag_lsp/agents/answers.py itself), and failures as messages the model can act on.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import type { LanguageModelTool } from "vscode";
import { contextAnswer, estimateTokens, searchAnswer } from "../../src/agentAnswers";
import {
  CONTEXT_TOOL, createContextTool, createSearchTool, registerLanguageModelTools, SEARCH_TOOL,
  type ContextInput, type SearchInput,
} from "../../src/lmTools";
import type { ContextItem, ContextResponse, SearchResponse } from "../../src/protocol";
import { CHECKED_KEYWORDS, DESCRIPTIVE_KEYWORDS, type JsonSchema } from "../../src/toolSchema";
import { FakeServer } from "./fakeServer";
import {
  CancellationError, CancellationTokenSource, fake, LanguageModelTextPart, LanguageModelToolResult, Uri, workspace,
} from "./vscode-stub";

const manifest = JSON.parse(readFileSync(join(__dirname, "../../package.json"), "utf8"));
const agentTools = JSON.parse(readFileSync(join(__dirname, "../../../schemas/agent-tools.json"), "utf8"));
const gold = JSON.parse(readFileSync(join(__dirname, "fixtures/agent-answers.json"), "utf8"));
const contributed = (name: string) => manifest.contributes.languageModelTools.find((t: { name: string }) => t.name === name);
const agentTool = (name: string) => agentTools.tools.find((t: { name: string }) => t.name === name);
const PAIRS = [[SEARCH_TOOL, "search_code"], [CONTEXT_TOOL, "get_context"]] as const;

const lines = (first: number, last: number) => ({ start: { line: first - 1, character: 0 }, end: { line: last, character: 0 } });
const searchResponse = gold.response as SearchResponse;
const noResults: SearchResponse = { results: [], tookMs: 1, partial: false, mode: "hybrid", warnings: [] };

async function invoke<T>(tool: LanguageModelTool<T>, input: unknown, token = new CancellationTokenSource().token): Promise<string> {
  const result = await tool.invoke({ input: input as T, toolInvocationToken: undefined }, token as never);
  expect(result).toBeInstanceOf(LanguageModelToolResult);
  const parts = (result as unknown as LanguageModelToolResult).content;
  expect(parts).toHaveLength(1);
  expect(parts[0]).toBeInstanceOf(LanguageModelTextPart);
  return (parts[0] as LanguageModelTextPart).value;
}

beforeEach(() => fake.reset());

describe("package.json contributes.languageModelTools", () => {
  it("has the two tools with schemas/agent-tools.json's input schema and description", () => {
    expect(manifest.contributes.languageModelTools.map((t: { name: string }) => t.name)).toEqual([SEARCH_TOOL, CONTEXT_TOOL]);
    for (const [name, agentName] of PAIRS) {
      const tool = contributed(name);
      expect(tool.inputSchema, name).toEqual(agentTool(agentName).inputSchema);
      expect(tool.modelDescription, name).toBe(agentTool(agentName).description);
    }
  });

  it("gives each what VS Code needs to list it and let users reference it with #", () => {
    expect(contributed(SEARCH_TOOL).toolReferenceName).toBe("ragSearch");
    expect(contributed(CONTEXT_TOOL).toolReferenceName).toBe("ragContext");
    for (const [name] of PAIRS) {
      const tool = contributed(name);
      // VS Code's rules (languageModelToolsContribution.ts): OpenAI's name charset, no reserved prefix.
      expect(tool.name).toMatch(/^(?!copilot_|vscode_)[\w-]+$/);
      expect(tool.toolReferenceName).toMatch(/^[\w-]+$/);
      expect(tool.canBeReferencedInPrompt).toBe(true);
      for (const key of ["displayName", "userDescription", "icon"]) expect(typeof tool[key], `${name}.${key}`).toBe("string");
      expect(tool.tags.length).toBeGreaterThan(0);
      for (const tag of tool.tags) expect(tag).not.toMatch(/^(copilot_|vscode_)/);
    }
  });

  it("uses only schema keywords the extension's own check enforces", () => {
    const known = new Set<string>([...CHECKED_KEYWORDS, ...DESCRIPTIVE_KEYWORDS]);
    const walk = (schema: JsonSchema, where: string): void => {
      for (const key of Object.keys(schema)) expect(known.has(key), `${where}: ${key}`).toBe(true);
      for (const [name, property] of Object.entries(schema.properties ?? {})) walk(property, `${where}.${name}`);
      if (schema.items) walk(schema.items, `${where}[]`);
    };
    for (const [name] of PAIRS) walk(contributed(name).inputSchema, name);
  });

  it("is what activation registers", () => {
    const disposable = registerLanguageModelTools(new FakeServer());
    expect([...fake.state.lmTools.keys()]).toEqual([SEARCH_TOOL, CONTEXT_TOOL]);
    disposable.dispose();
    expect(fake.state.lmTools.size).toBe(0);
  });
});

describe("rag-lsp_searchCode", () => {
  it("says what it searches for, and asks no confirmation (it only reads)", async () => {
    const tool = createSearchTool(new FakeServer());
    const prepared = await tool.prepareInvocation!({ input: { query: "where are\n redirects followed?" } }, new CancellationTokenSource().token as never);
    expect(prepared).toEqual({ invocationMessage: 'Searching the workspace for "where are redirects followed?"' });
  });

  it("sends rag/search with the schema's defaults", async () => {
    const server = new FakeServer({ "rag/search": noResults });
    await invoke(createSearchTool(server), { query: "retry" });
    expect(server.requests).toEqual([{ method: "rag/search", params: { query: "retry", topK: 10 } }]);
  });

  it("maps top_k and the filters, and passes the cancellation token", async () => {
    const server = new FakeServer({ "rag/search": noResults });
    const source = new CancellationTokenSource();
    await invoke(createSearchTool(server), { query: "retry", top_k: 3, paths: ["src/**"], languages: ["python"], kinds: ["function", "method"], max_tokens: 500, snippet_lines: 2 }, source.token);
    expect(server.requests[0].params).toEqual({ query: "retry", topK: 3, filters: { paths: ["src/**"], languages: ["python"], kinds: ["function", "method"] } });
    expect(server.tokens[0]).toBe(source.token);
  });

  it("leaves empty filters out", async () => {
    const server = new FakeServer({ "rag/search": noResults });
    await invoke(createSearchTool(server), { query: "retry", paths: [], kinds: ["class"] });
    expect(server.requests[0].params).toEqual({ query: "retry", topK: 10, filters: { kinds: ["class"] } });
  });

  it.each(gold.cases as { maxTokens: number; snippetLines: number; text: string }[])(
    "answers as rag_lsp/agents/answers.py does (max_tokens=$maxTokens, snippet_lines=$snippetLines)", async ({ maxTokens, snippetLines, text }) => {
      const server = new FakeServer({ "rag/search": searchResponse });
      expect(await invoke(createSearchTool(server), { query: gold.query, max_tokens: maxTokens, snippet_lines: snippetLines })).toBe(text);
    });

  it("locates files with lines, numbers snippet lines from the result's first line, and lists other ranges", () => {
    const text = searchAnswer(searchResponse, { query: gold.query, maxTokens: 2000, snippetLines: 8 });
    expect(text).toContain("src/http/client.py:12-18  follow_redirects (function)  score 0.63\n  also: 8-9, 30\n  12  def follow_redirects(");
    expect(text).toContain("  18              raise TooManyRedirects(hops)\n\n");
    expect(text).toContain("docs/usage.md:98-140  Usage (section)  score 0.30\n  also: 10-12, 20-22, 30-32, 40-42, 50-52 (+2 more)\n   98  ## Usage");
    expect(text).toContain("  105  line 4\n\n"); // 8 lines: 98..105
    expect(text).not.toContain("line 5");
    expect(text).toMatch(/\n {2}100 {6}x = a{152} …\n/); // long lines cut at 160 characters
    expect(text.endsWith("src/util.py:5  score 0.10\n  5  x = 1")).toBe(true);
  });

  it("keeps to max_tokens, dropping snippets before files, and says what it left out", () => {
    const full = searchAnswer(searchResponse, { query: gold.query, maxTokens: 2000, snippetLines: 8 });
    expect(full).not.toContain("Left out");
    for (const maxTokens of [100, 130, 170, estimateTokens(full)]) {
      const text = searchAnswer(searchResponse, { query: gold.query, maxTokens, snippetLines: 8 });
      expect(estimateTokens(text), `max_tokens=${maxTokens}`).toBeLessThanOrEqual(maxTokens);
      expect(text).toContain(`(Left out to stay within max_tokens=${maxTokens}: `);
    }
    const tiny = searchAnswer(searchResponse, { query: gold.query, maxTokens: 100, snippetLines: 8 });
    expect(tiny).toContain("the code of 2 files and 1 more file; raise max_tokens to see them.)");
    expect(tiny).not.toContain("src/util.py");
  });

  it("says so when nothing is relevant", async () => {
    const server = new FakeServer({ "rag/search": gold.empty.response });
    expect(await invoke(createSearchTool(server), { query: gold.empty.query })).toBe(gold.empty.text);
  });

  it("warns first while the index is still being built, with the server's warnings", async () => {
    const server = new FakeServer({ "rag/search": { ...searchResponse, partial: true, warnings: ["folder b: index is corrupt"] } });
    server.status = { state: "indexing", files: 10, chunks: 40, message: "", folders: [], percentage: 42 };
    const text = await invoke(createSearchTool(server), { query: gold.query, snippet_lines: 0 });
    expect(text.split("\n").slice(0, 3)).toEqual([
      "Note: the index is still being built (42% so far); results may be incomplete. Search again later for the full picture.",
      "folder b: index is corrupt",
      `3 files for "where's the redirect?", best first (hybrid search, 22 ms):`,
    ]);
  });

  it("names files with their folder in a multi-root workspace", async () => {
    workspace.workspaceFolders = [
      { uri: Uri.file("/work/repo"), name: "repo", index: 0 }, { uri: Uri.file("/work/other"), name: "other", index: 1 }];
    const server = new FakeServer({ "rag/search": searchResponse });
    const text = await invoke(createSearchTool(server), { query: gold.query, snippet_lines: 0 });
    expect(text).toContain("\nrepo/src/http/client.py:12-18  follow_redirects");
  });
});

describe("rag-lsp_getContext", () => {
  const item = (source: ContextItem["source"], path: string, first?: number, last?: number): ContextItem =>
    ({ source, uri: path ? `file:///work/repo/${path}` : null, path, range: first ? lines(first, last!) : null, title: `title of ${path || source}`, score: 0.5, tokens: 100 });
  const packed: ContextResponse = {
    context: "### codebase: run (a.py:L12-L20)\n```python a.py:L12-L20\ndef run(): pass\n```",
    items: [item("knowledge", ""), item("codebase", "a.py", 12, 20), item("codebase", "b.py", 1, 9)],
    totalTokens: 300, budget: 4000,
    dropped: [{ ...item("codebase", "c.py", 3, 7), reason: "budget" }, { ...item("codebase", "a.py", 12, 20), reason: "duplicate" }, { ...item("knowledge", ""), reason: "budget" }],
    query: "why do retries pile up?",
  };

  it("says which mode it gathers for", async () => {
    const tool = createContextTool(new FakeServer());
    const token = new CancellationTokenSource().token as never;
    expect(await tool.prepareInvocation!({ input: { query: "audit login", mode: "security" } }, token)).toEqual({ invocationMessage: 'Gathering security context for "audit login"' });
    expect(await tool.prepareInvocation!({ input: { query: "why?" } }, token)).toEqual({ invocationMessage: 'Gathering debugger context for "why?"' });
  });

  it("sends rag/injectContext with the schema's defaults, or the given mode, budget and knowledge", async () => {
    const server = new FakeServer({ "rag/injectContext": packed });
    await invoke(createContextTool(server), { query: "why do retries pile up?" });
    await invoke(createContextTool(server), { query: "audit", mode: "security", token_budget: 800, include_knowledge: false });
    expect(server.requests.map((r) => [r.method, r.params])).toEqual([
      ["rag/injectContext", { mode: "debugger", query: "why do retries pile up?", tokenBudget: 4000, includeKnowledge: true }],
      ["rag/injectContext", { mode: "security", query: "audit", tokenBudget: 800, includeKnowledge: false }],
    ]);
  });

  it("answers with a one-line summary, then the packed context", async () => {
    const server = new FakeServer({ "rag/injectContext": packed });
    const text = await invoke(createContextTool(server), { query: "why do retries pile up?", mode: "performance" } satisfies ContextInput);
    expect(text).toBe(
      "performance context for 'why do retries pile up?': 300 of 4000 tokens, 1 knowledge, 2 codebase item(s); " +
      "2 more did not fit (c.py:L3-L7, title of knowledge)\n\n" + packed.context);
  });

  it("says so when nothing is relevant, after the indexing note", async () => {
    const server = new FakeServer({ "rag/injectContext": { ...packed, context: "", items: [], dropped: [] } });
    server.status = { state: "indexing", files: 1, chunks: 2, message: "", folders: [] };
    expect(await invoke(createContextTool(server), { query: "anything" })).toBe(
      "Note: the index is still being built; results may be incomplete. Search again later for the full picture.\n" +
      "Nothing relevant to 'anything' in the workspace or the debugger knowledge base.");
  });

  it("says which budget would fit when relevant items were found but none fit", () => {
    const [first, duplicate, last] = packed.dropped; // budget, duplicate, budget
    const tooBig = { ...packed, context: "", items: [], totalTokens: 0, budget: 150,
      dropped: [{ ...first, tokens: 640 }, { ...duplicate, tokens: 90 }, { ...last, tokens: 180 }] };
    expect(contextAnswer(tooBig, { query: "q", mode: "debugger" })).toBe(
      "Nothing fits token_budget 150: 2 relevant item(s) were found, the smallest 180 tokens; " +
      "ask again with token_budget 200 or more.");
  });

  it("formats without the tool too (contextAnswer)", () => {
    expect(contextAnswer({ ...packed, dropped: [] }, { query: "q", mode: "planning" }).split("\n")[0])
      .toBe("planning context for 'q': 300 of 4000 tokens, 1 knowledge, 2 codebase item(s)");
  });
});

describe("failures the model sees", () => {
  const search = (server = new FakeServer({ "rag/search": noResults })) => createSearchTool(server);

  it.each([
    [{ query: "x", top_k: 0 }, "invalid arguments for rag-lsp_searchCode: $.top_k = 0: must be at least 1"],
    [{ query: "x", top_k: 2.5 }, "invalid arguments for rag-lsp_searchCode: $.top_k = 2.5: must be an integer"],
    [{ query: "" }, "invalid arguments for rag-lsp_searchCode: $.query = '': must not be empty"],
    [{}, "invalid arguments for rag-lsp_searchCode: $.query: required"],
    [{ query: "x", kinds: ["function", "lambda"] }, "invalid arguments for rag-lsp_searchCode: $.kinds[1] = 'lambda': must be one of 'function', 'method', 'class', 'constant', 'module', 'section', 'text'"],
    [{ query: "x", max_tokens: 10, filter: "src" }, "invalid arguments for rag-lsp_searchCode: $.max_tokens = 10: must be at least 100; $.filter: unknown field (known: kinds, languages, max_tokens, paths, query, snippet_lines, top_k)"],
    [{ query: "x".repeat(2001) }, "invalid arguments for rag-lsp_searchCode: $.query = 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...: must be at most 2,000 characters (got 2,001)"],
  ] as [SearchInput, string][])("rejects %j before asking the server", async (input, message) => {
    const server = new FakeServer({ "rag/search": noResults });
    await expect(invoke(search(server), input)).rejects.toThrow(message);
    expect(server.requests).toEqual([]);
  });

  it("checks get_context's arguments too", async () => {
    const server = new FakeServer({ "rag/injectContext": {} });
    await expect(invoke(createContextTool(server), { query: "x", token_budget: 50, include_knowledge: "yes" }))
      .rejects.toThrow("invalid arguments for rag-lsp_getContext: $.token_budget = 50: must be at least 100; $.include_knowledge = 'yes': must be true or false");
    expect(server.requests).toEqual([]);
  });

  it("says what to do when the server is not running", async () => {
    const server = new FakeServer({ "rag/search": noResults });
    server.state = "stopped";
    await expect(invoke(search(server), { query: "x" })).rejects.toThrow(
      "The rag-lsp language server is not running, so rag-lsp_searchCode cannot answer. Ask the user to run the command 'rag-lsp: Restart server'");
    expect(server.requests).toEqual([]);
  });

  it("says so when the server stops during the request", async () => {
    const server = new FakeServer({ "rag/injectContext": () => { server.state = "stopped"; throw new Error("connection got disposed"); } });
    await expect(invoke(createContextTool(server), { query: "x" })).rejects.toThrow("The rag-lsp language server is not running, so rag-lsp_getContext cannot answer.");
  });

  it("passes on the server's own message, which names the fix", async () => {
    const server = new FakeServer({ "rag/injectContext": new Error("$.mode = 'review': unknown mode; the modes are debugger, security, performance, planning (add others with extraModes)") });
    await expect(invoke(createContextTool(server), { query: "x", mode: "review" })).rejects.toThrow(
      "rag-lsp_getContext failed: $.mode = 'review': unknown mode; the modes are debugger, security, performance, planning (add others with extraModes)");
  });

  it("reports a cancelled call as cancelled", async () => {
    const source = new CancellationTokenSource();
    const server = new FakeServer({ "rag/search": () => { source.cancel(); throw new Error("Request cancelled"); } });
    await expect(invoke(search(server), { query: "x" }, source.token)).rejects.toBeInstanceOf(CancellationError);
  });
});
