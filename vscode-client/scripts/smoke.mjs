#!/usr/bin/env node
// End-to-end check of the bundled extension (dist/extension.js) against a real `rag-lsp serve`,
// with the VS Code API faked (test/unit/vscode-stub.ts, plus a catch-all for the parts the
// language client touches). Not part of `npm test`: it needs the Python server installed.
//   npm run build && node scripts/smoke.mjs [/path/to/rag-lsp]   (default ../.venv/bin/rag-lsp)
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const program = resolve(process.argv[2] ?? join(root, "../.venv/bin/rag-lsp"));
const work = mkdtempSync(join(tmpdir(), "rag-lsp-smoke-"));
const require = createRequire(import.meta.url);
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
let failures = 0;
const check = (ok, what, detail = "") => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${ok || !detail ? "" : `: ${JSON.stringify(detail)}`}`);
  if (!ok) failures++;
};

// A tiny workspace: one Python file, one note, and a .rag-lsp.json the editor must not override.
const folder = join(work, "ws");
execFileSync("mkdir", ["-p", join(folder, "generated")]);
writeFileSync(join(folder, "runner.py"), "def run_with_retries(job, attempts=3):\n    for i in range(attempts):\n" +
  "        try:\n            return job()\n        except ConnectionError:\n            continue\n    raise RuntimeError('gave up')\n");
writeFileSync(join(folder, "generated", "big.py"), "def generated():\n    pass\n");
writeFileSync(join(folder, ".rag-lsp.json"), JSON.stringify({ exclude: ["generated/"] }));

// The stub, compiled, behind a proxy that answers anything else with a harmless catch-all.
await build({ entryPoints: [join(root, "test/unit/vscode-stub.ts")], outfile: join(work, "stub.cjs"), format: "cjs", platform: "node", logLevel: "error" });
const stub = require(join(work, "stub.cjs"));
function anything(name) {
  return new Proxy(function () { return anything(`${name}()`); }, {
    get: (_t, key) => (key === "then" ? undefined : key === Symbol.iterator ? function* () {} : key === "dispose" ? () => {} : anything(`${name}.${String(key)}`)),
    construct: () => anything(`new ${name}`),
  });
}
const NAMESPACES = ["window", "workspace", "commands", "env", "lm", "chat"];
const withFallback = (target, name) => new Proxy(target, {
  get: (t, key) => (key in t ? (NAMESPACES.includes(key) ? withFallback(t[key], key) : t[key])
    : ["then", "default", "__esModule"].includes(key) ? undefined : anything(`${name}.${String(key)}`)),
});
const vscode = withFallback(Object.assign({}, stub, { version: "1.100.0", env: { ...stub.env, appName: "Visual Studio Code", language: "en" } }), "vscode");
const Module = require("node:module");
const load = Module._load;
Module._load = function (request, ...rest) { return request === "vscode" ? vscode : load.call(this, request, ...rest); };

const { fake, Uri, commands, Selection, Position } = stub;
// Defaults as package.json contributes them, so "sent only what the user set" means something.
const { properties } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).contributes.configuration;
for (const [key, spec] of Object.entries(properties)) fake.state.defaults[key] = spec.default;
fake.state.settings["ragLsp.server.command"] = [program, "serve"];
fake.state.settings["ragLsp.context.reserveTokens"] = 100; // client-only: must not reach the server
stub.workspace.workspaceFolders = [{ uri: Uri.file(folder), name: "ws", index: 0 }];
const memory = new Map();
const context = {
  subscriptions: [], extensionUri: Uri.file(root), storageUri: Uri.file(join(work, "storage")),
  workspaceState: { get: (k) => memory.get(k), update: async (k, v) => memory.set(k, v), keys: () => [...memory.keys()] },
};
const extension = require(join(root, "dist/extension.js"));
const bar = () => fake.state.statusBarItems[0];
const waitFor = async (pattern, seconds = 60) => {
  for (let i = 0; i < seconds * 4 && !pattern.test(bar().text); i++) await sleep(250);
  return bar().text;
};
const lastMessage = () => fake.state.messages.at(-1);
/** Polls until `condition()` holds (a loaded machine starts Python slowly), at most `seconds`. */
const waitUntil = async (condition, seconds = 30) => {
  for (let i = 0; i < seconds * 4 && !condition(); i++) await sleep(250);
  return condition();
};

// The extension host logs unhandled rejections (vscode-languageclient leaves some when a server
// dies while starting); Node would exit on them.
process.on("unhandledRejection", (err) => console.log(`(unhandled rejection, as the extension host logs it: ${err})`));
await extension.activate(context);
check(/ready/.test(await waitFor(/ready|degraded|error/)), "status bar reaches ready", bar().text);
// runner.py and .rag-lsp.json; generated/ would be a third file if VS Code's default exclude ([]) won.
check(/\n1 folder, 2 files, /.test(bar().tooltip), ".rag-lsp.json's exclude is kept (editor defaults not sent)", bar().tooltip);
check(execFileSync("ls", [join(work, "storage")]).toString().startsWith("ws-"), "index in workspace storage");

await commands.executeCommand("ragLsp.showStatus");
check(/rag-lsp: ready — 1 folder, 2 files/.test(lastMessage()?.text), "rag/status shown", lastMessage());
check(!fake.state.output.some((line) => /invalid settings/.test(line)), "no settings complaints (client-only keys filtered)");

// The search box and the Results tree: a query typed goes to the server and fills the tree.
await commands.executeCommand("ragLsp.search");
const input = fake.state.inputBoxes.at(-1);
input.type("retry a job on connection errors");
const resultsTree = fake.state.treeViews.get("ragLsp.resultsView").provider;
for (let i = 0; i < 100 && !resultsTree.files.length; i++) await sleep(50);
const [fileNode] = resultsTree.getChildren();
const [rangeNode] = fileNode ? resultsTree.getChildren(fileNode) : [];
const row = rangeNode && resultsTree.getTreeItem(rangeNode);
check(fileNode?.group.path === "runner.py" && row?.label === "run_with_retries" && /^L1–7/.test(row.description),
  "search box fills the Results tree from the server", row && { label: row.label, description: row.description });

stub.window.activeTextEditor = fake.editor(Uri.file(join(folder, "runner.py")), readFileSync(join(folder, "runner.py"), "utf8"),
  new Selection(new Position(4, 0), new Position(5, 0)));
fake.state.answers.push("debugger", "Retry storms");
await commands.executeCommand("ragLsp.addToKnowledgeBase");
check(/added to the debugger knowledge base/.test(lastMessage()?.text), "rag/kb.add with an anchor", lastMessage());

fake.state.answers.push("debugger", "Copy");
await commands.executeCommand("ragLsp.activateMode");
const opened = fake.state.shownEditors.at(-1)?.document.getText() ?? "";
check(/### knowledge: Retry storms/.test(opened) && /### codebase: run_with_retries/.test(opened), "context opened as Markdown", opened.slice(0, 200));
check(fake.state.clipboard === opened, "context copied");

// The Knowledge view lists the entry added above.
const knowledge = fake.state.treeViews.get("ragLsp.knowledgeView").provider;
const [debuggerMode] = await knowledge.getChildren();
check(debuggerMode?.entries.map((e) => e.title).join() === "Retry storms", "Knowledge view lists the entry", debuggerMode);

// The agent-mode tools, as agent mode calls them: through the running server.
const tool = (name) => fake.state.lmTools.get(name);
const callTool = async (name, input) => {
  try {
    const result = await tool(name).invoke({ input, toolInvocationToken: undefined }, new stub.CancellationTokenSource().token);
    return result.content.map((part) => part.value).join("");
  } catch (err) {
    return `threw: ${err.message}`;
  }
};
const found = await callTool("rag-lsp_searchCode", { query: "retry a job on connection errors", snippet_lines: 2 });
check(/^1 file for 'retry a job on connection errors', best first \((hybrid|lexical) search, \d+ ms\):\n\nrunner\.py:1-7  run_with_retries \(function\)  score 0\.\d\d\n  1  def run_with_retries\(job, attempts=3\):\n  2      for i in range\(attempts\):$/.test(found),
  "search tool answers through rag/search", found);
const none = await callTool("rag-lsp_searchCode", { query: "x", paths: ["docs/**"] });
// The server says the filter matched no file (a warning above the answer): proof it got there.
check(/^no indexed file in \S+ matches the filters \(paths docs\/\*\*\)[^\n]*\nNo relevant code found for 'x'/.test(none),
  "search tool passes filters", none);
const gathered = await callTool("rag-lsp_getContext", { query: "retry a job on connection errors", token_budget: 2000 });
check(/^debugger context for 'retry a job on connection errors': \d+ of 2000 tokens, .*item\(s\)\n\n/.test(gathered) && /run_with_retries/.test(gathered),
  "context tool answers through rag/injectContext", gathered.slice(0, 300));
const unknownMode = await callTool("rag-lsp_getContext", { query: "x", mode: "review" });
check(/^threw: rag-lsp_getContext failed: .*review/.test(unknownMode), "context tool passes on the server's error", unknownMode);

fake.changeSettings({ "ragLsp.topK": 0 });
await waitUntil(() => /topK/.test(lastMessage()?.text), 15);
check(/`topK` = 0 in the editor's `ragLsp` settings/.test(lastMessage()?.text), "a changed setting reaches the server", lastMessage());

fake.changeSettings({ "ragLsp.topK": 5 }); // valid again, so restarts have nothing to complain about
await sleep(1000);
const messagesBefore = fake.state.messages.length;
// Kill the server five times: four restarts, then it stays down and says so.
const serverPids = () => {
  try {
    return execFileSync("pgrep", ["-P", String(process.pid), "-f", "serve"], { encoding: "utf8" }).trim().split("\n").filter(Boolean).map(Number);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
};
for (let crash = 1; crash <= 5; crash++) {
  await waitFor(/ready|degraded/);
  for (const pid of serverPids()) process.kill(pid, "SIGKILL");
  await waitUntil(() => !/ready|degraded/.test(bar().text), 10);
}
await waitUntil(() => /stopped 5 times/.test(lastMessage()?.text), 10);
check(/stopped/.test(bar().text), "gives up after 5 crashes in 3 minutes", bar().text);
check(/stopped 5 times in 3 minutes/.test(lastMessage()?.text) && lastMessage()?.actions.includes("Show log"), "says so, with Show log", lastMessage());
check(fake.state.messages.length === messagesBefore + 1, "and says nothing else", fake.state.messages.slice(messagesBefore));
const down = await callTool("rag-lsp_searchCode", { query: "retry" });
check(/^threw: The rag-lsp language server is not running, .*'rag-lsp: Restart server'/.test(down), "a tool says what to do when the server is down", down);

await commands.executeCommand("ragLsp.restartServer");
check(/ready/.test(await waitFor(/ready|degraded|error/)), "Restart server brings it back", bar().text);
fake.changeSettings({ "ragLsp.server.command": [program, "serve", "--stdio"] });
await sleep(500);
check(/ready/.test(await waitFor(/ready|degraded|error/)), "restarts when ragLsp.server.* changes", bar().text);
check(fake.state.output.filter((line) => /^starting /.test(line)).at(-1)?.endsWith("serve --stdio (from ragLsp.server.command)"), "with the new command");

// A server that exits while starting is reported once, with the fix, and not restarted.
fake.changeSettings({ "ragLsp.server.command": [program, "serve", "--no-such-flag"] });
const isStartFailure = (m) => /could not start .*--no-such-flag/.test(m.text);
await waitUntil(() => fake.state.messages.some(isStartFailure));
await sleep(2000);
const startFailure = fake.state.messages.filter(isStartFailure);
check(startFailure.length === 1 && startFailure[0].actions.includes("Show log"), "a server that exits at start-up is explained once", fake.state.messages.slice(-3));
await waitUntil(() => serverPids().length === 0, 10); // the previous server is killed 2 s after its exit
check(/stopped/.test(bar().text) && serverPids().length === 0, "and not restarted", bar().text);

await extension.deactivate();
await waitUntil(() => serverPids().length === 0, 10);
check(serverPids().length === 0, "deactivate stops the server", serverPids());
if (failures) console.log("--- end of the rag-lsp log ---\n" + fake.state.output.filter((line) => !line.startsWith(" ")).slice(-80).join("\n"));
console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
