#!/usr/bin/env node
// The real-VS-Code end-to-end test: the packaged extension (dist/rag-lsp.vsix) in code-server,
// against this checkout's `.venv/bin/rag-lsp serve`, driven in headless Chromium like a user.
// Each step prints its time; a failure prints the step, the last screenshot, what is on screen
// and the tail of the extension's log, and exits 1. Screenshots and logs: test-results/e2e/.
//   npm run package && node e2e/install-code-server.mjs && node e2e/scenario.mjs
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { EXPECTED, KB_FILE, KB_LINES, KB_TITLE, QUERY, writeFixture } from "./fixture.mjs";
import {
  COMMANDS, CONTAINER_TITLE, CONTEXT_DOCUMENT, KNOWLEDGE_PROMPTS, KNOWLEDGE_VIEW, missingViews, RESULTS_VIEW, STATUS,
} from "./ui.mjs";
import { escapeRegExp, GiveUp, startWorkbench, waitFor } from "./workbench.mjs";

const CLIENT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REPO = resolve(CLIENT, "..");
const VSIX = join(CLIENT, "dist", "rag-lsp.vsix");
const SERVER = join(REPO, ".venv", "bin", "rag-lsp");
const OUT = join(CLIENT, "test-results", "e2e");
const MODE = "debugger";
/** Asked when activating a mode with no file open; the fixture answers it. */
const CONTEXT_QUERY = "why does retry_with_backoff give up";
/** The whole scenario, after the install; a hang fails rather than eating CI's time. */
const SCENARIO_LIMIT_MS = 5 * 60_000;

for (const [path, fix] of [[VSIX, "run `npm run package` in vscode-client"], [SERVER, "run `make setup` at the repository root"]]) {
  if (!existsSync(path)) {
    console.error(`e2e: ${path} is missing; ${fix}`);
    process.exit(1);
  }
}

const missing = missingViews(JSON.parse(readFileSync(join(CLIENT, "package.json"), "utf8")));
if (missing.length) {
  console.error(`e2e: package.json contributes no ${missing.join(" or ")} view: the scenario checks the Results and Knowledge trees (e2e/ui.mjs)`);
  process.exit(1);
}

const checked = [];
const started = Date.now();
let wb;
let current = "start";
/** The fixture workspace's temporary parent folder. */
let fixtureRoot;
/** Where the probe extension writes what the tools answered. */
let probeReport;
const PROBE_COMMAND = "rag-lsp e2e: Probe language model tools";

const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
function ok(point) { checked.push(point); }
let notes = [];
/** A line printed under the step's result. */
function note(text) { notes.push(text); }
function expect(condition, message) { if (!condition) throw new Error(message); }

async function step(title, body) {
  current = title;
  const since = Date.now();
  notes = [];
  process.stdout.write(`e2e: ${title} … `);
  await body();
  console.log(`ok (${secs(Date.now() - since)})`);
  for (const line of notes) console.log(`       ${line}`);
}

async function fail(err) {
  console.log("FAILED");
  console.error(`\ne2e: FAILED at step "${current}" after ${secs(Date.now() - started)}:\n  ${err instanceof Error ? err.message : err}`);
  if (wb?.page) {
    const shot = await wb.screenshot("failure.png").catch(() => wb.lastScreenshot);
    console.error(`  screenshot: ${shot ?? "(none)"}`);
    console.error(`  notifications: ${JSON.stringify(await wb.notifications().catch(() => []))}`);
    console.error(`  quick input: ${JSON.stringify(await wb.quickInput().catch(() => undefined))}`);
    console.error(`  editor tabs: ${JSON.stringify(await wb.editorTabs().catch(() => []))}`);
    if (wb.pageErrors.length) console.error(`  page errors: ${wb.pageErrors.slice(-5).join("\n    ")}`);
  }
  if (wb) console.error(`\nrag-lsp output channel (last lines):\n${wb.extensionLog(40)}`);
  console.error(`\nlogs and screenshots: ${OUT}`);
  await wb?.close().catch(() => undefined);
  if (fixtureRoot) rmSync(fixtureRoot, { recursive: true, force: true });
  process.exit(1);
}

const watchdog = setTimeout(() => void fail(new Error(`the scenario took longer than ${secs(SCENARIO_LIMIT_MS)}`)), SCENARIO_LIMIT_MS);

// ---- the steps --------------------------------------------------------------------------------

async function statusText() {
  const texts = await wb.page.locator(".part.statusbar .statusbar-item").allInnerTexts();
  return texts.map((text) => text.trim()).find((text) => STATUS.any.test(text));
}

async function waitForReady() {
  const seen = [];
  let badSince;
  await waitFor('the status bar item to read "rag: ready"', async () => {
    const text = await statusText();
    if (text && seen[seen.length - 1] !== text) seen.push(text);
    // A crash shows "stopped" until the restart; a state that stays bad will not become ready.
    badSince = text && STATUS.bad.test(text) ? badSince ?? Date.now() : undefined;
    if (badSince && Date.now() - badSince > STATUS.badForMs) throw new GiveUp(`the status bar item says "${text}" (${seen.join(" → ")})`);
    return text && STATUS.ready.test(text);
  }, { timeout: STATUS.readyWithinMs, interval: 200 });
  note(seen.join(" → "));
  ok('status bar item reaches "rag: ready"');
}

async function openContainer() {
  await wb.openViewContainer(CONTAINER_TITLE);
  for (const name of [RESULTS_VIEW.name, KNOWLEDGE_VIEW.name]) await wb.pane(name).waitFor({ state: "visible", timeout: 10_000 });
  ok(`the "${CONTAINER_TITLE}" view container shows ${RESULTS_VIEW.name} and ${KNOWLEDGE_VIEW.name}`);
}

/** A focused input box; results fill the Results tree as the query is typed; Enter focuses the tree. */
async function searchInTree() {
  await wb.runCommand(COMMANDS.search);
  await waitFor("the search box to open, focused", async () => {
    const input = await wb.quickInput();
    return input && input.focused && !input.value.startsWith(">");
  });
  await wb.typeInQuickInput(QUERY);
  await wb.treeRow(RESULTS_VIEW.name, RESULTS_VIEW.fileRow(EXPECTED.file), 30_000);
  ok("results fill the Results tree as the query is typed (before Enter)");
  await wb.page.keyboard.press("Enter");
  await waitFor("Enter to move the focus to the Results tree", () =>
    wb.pane(RESULTS_VIEW.name).evaluate((pane) => pane.contains(document.activeElement)));
  ok("Enter in the search box focuses the Results tree");
  const files = (await wb.treeRows(RESULTS_VIEW.name)).filter((row) => RESULTS_VIEW.anyFileRow.test(row.label));
  expect(RESULTS_VIEW.fileRow(EXPECTED.file).test(files[0]?.label ?? ""),
    `the first file row should be ${EXPECTED.file}, got ${JSON.stringify(files.map((row) => row.label))}`);
  ok(`the first file row is "${files[0].label}"`);
  await wb.screenshot("results-tree.png");
}

/** A file row's children are its ranges; clicking one selects exactly that range. */
async function openRangeFromTree() {
  const fileRow = await wb.treeRow(RESULTS_VIEW.name, RESULTS_VIEW.fileRow(EXPECTED.file));
  if ((await fileRow.getAttribute("aria-expanded")) === "false") await fileRow.click();
  const rows = await wb.treeRows(RESULTS_VIEW.name);
  const at = rows.findIndex((row) => RESULTS_VIEW.fileRow(EXPECTED.file).test(row.label));
  const child = rows.slice(at + 1).find((row) => RESULTS_VIEW.rangeRow.test(row.label));
  expect(child && child.level === rows[at].level + 1, `no range row under ${EXPECTED.file}: ${JSON.stringify(rows)}`);
  const [, , first, last] = child.label.match(RESULTS_VIEW.rangeRow);
  await (await wb.treeRow(RESULTS_VIEW.name, new RegExp(`^${escapeRegExp(child.label)}$`))).click();
  const status = await checkSelection(Number(first), Number(last ?? first), `the row "${child.label}"`);
  // Like going to a definition: the cursor sits on the range's first line.
  expect(status.line === Number(first), `the cursor should be on line ${first}, the status bar says "${status.text}"`);
  ok(`the cursor is on the range's first line (${status.text})`);
}

async function checkSelection(first, last, what) {
  expect(first === EXPECTED.startLine && last === EXPECTED.endLine,
    `${what} should cover lines ${EXPECTED.startLine}–${EXPECTED.endLine} (${EXPECTED.symbol}), not ${first}–${last}`);
  await waitFor(`an editor on ${EXPECTED.fileName}`, async () => (await wb.editorTabs()).some((tab) => tab.active && tab.label === EXPECTED.fileName));
  let lines;
  const shown = await waitFor(`lines ${first}–${last} selected`, async () => {
    lines = await wb.selectedLines();
    return lines && lines.first === first && lines.last === last ? lines : undefined;
  }).catch((err) => {
    throw new Error(`${err.message}; the editor shows ${lines ? `lines ${lines.first}–${lines.last}` : "no lines"} selected`);
  });
  const status = await wb.selectionStatus();
  expect(status?.selected > 0, `the status bar shows no selection: ${JSON.stringify(status)}`);
  ok(`clicking ${what} opens ${EXPECTED.fileName} with lines ${shown.first}–${shown.last} selected (${status.text})`);
  await wb.screenshot("opened-range.png");
  return status;
}

/** No chat model in code-server: the packed context opens in an editor. */
async function activateMode() {
  await wb.clearNotifications();
  await wb.runCommand(COMMANDS.activateMode);
  await wb.waitForQuickInput(CONTEXT_DOCUMENT.pickMode);
  await wb.pickQuickItem(MODE);
  // With no file open the command asks what the context is for.
  await wb.waitForQuickInput(CONTEXT_DOCUMENT.askForQuery);
  await wb.typeInQuickInput(CONTEXT_QUERY);
  await wb.page.keyboard.press("Enter");
  // The summary shows once the document is open: until then the command may still take the focus.
  await waitFor("the context summary", async () => (await wb.notifications()).some((text) => CONTEXT_DOCUMENT.summary(MODE).test(text)), { timeout: 30_000 });
  return waitFor("an editor with the packed context", async () => (await wb.editorTabs()).find((tab) =>
    tab.active && CONTEXT_DOCUMENT.tab(MODE).test(tab.label)), { timeout: 30_000 });
}

async function modeContext() {
  await wb.runCommand(COMMANDS.closeAllEditors);
  const tab = await activateMode();
  const text = await waitFor("the context to name retry_with_backoff", async () => {
    const shown = await wb.editorText();
    return shown.includes(EXPECTED.symbol) ? shown : undefined;
  });
  expect(/net\/retry\.py/.test(text), `the context does not attribute net/retry.py:\n${text.slice(0, 400)}`);
  ok(`"${COMMANDS.activateMode}" → ${MODE} opens the packed context ("${tab.label}") naming ${EXPECTED.file}`);
  await wb.screenshot("mode-context.png");
  await wb.page.keyboard.press("x");
  await waitFor("typing to be refused (read-only)", async () =>
    /read-only/i.test(await wb.page.locator(".monaco-editor-overlaymessage").allInnerTexts().then((t) => t.join(" "))));
  ok(`the ${MODE}.md document is read-only`);
  await wb.page.keyboard.press("Escape");
  await activateMode();
  const tabs = (await wb.editorTabs()).filter((t) => CONTEXT_DOCUMENT.tab(MODE).test(t.label));
  expect(tabs.length === 1, `activating ${MODE} twice should keep one tab, found ${JSON.stringify(tabs)}`);
  ok(`activating ${MODE} again keeps one ${MODE}.md tab`);
}

async function addToKnowledgeBase() {
  await wb.openFile(KB_FILE);
  await wb.selectLines(KB_LINES.start, KB_LINES.end);
  await waitFor("the selection to show", async () => (await wb.selectedLines())?.last === KB_LINES.end);
  await wb.clearNotifications();
  await wb.runCommand(COMMANDS.addToKnowledgeBase);
  await wb.waitForQuickInput(KNOWLEDGE_PROMPTS.pickMode);
  await wb.pickQuickItem(MODE);
  await wb.waitForQuickInput(KNOWLEDGE_PROMPTS.title);
  await wb.typeInQuickInput(KB_TITLE);
  await wb.page.keyboard.press("Enter");
  await waitFor("the confirmation", async () => (await wb.notifications()).some((text) => KNOWLEDGE_PROMPTS.added(MODE).test(text)));
  ok(`"${COMMANDS.addToKnowledgeBase}" confirms the entry ("added to the ${MODE} knowledge base")`);
  await wb.openViewContainer(CONTAINER_TITLE);
  // The mode's row becomes expandable once the tree has refreshed with the new entry.
  const modeLabel = await waitFor(`the ${MODE} row to hold entries`, async () => (await wb.treeRows(KNOWLEDGE_VIEW.name))
    .find((row) => KNOWLEDGE_VIEW.modeRow(MODE).test(row.label) && row.expanded !== null)?.label, { timeout: 20_000 });
  const modeRow = await wb.treeRow(KNOWLEDGE_VIEW.name, new RegExp(`^${escapeRegExp(modeLabel)}$`));
  if ((await modeRow.getAttribute("aria-expanded")) === "false") await modeRow.click();
  await wb.treeRow(KNOWLEDGE_VIEW.name, KNOWLEDGE_VIEW.entryRow(KB_TITLE), 20_000);
  ok(`the Knowledge tree shows "${MODE}" with the entry "${KB_TITLE}"`);
  await wb.screenshot("knowledge-view.png");
}

async function deleteKnowledgeEntry() {
  const entry = await wb.treeRow(KNOWLEDGE_VIEW.name, KNOWLEDGE_VIEW.entryRow(KB_TITLE));
  // The entry's inline action (a trash can shown on hover), as a mouse user deletes it.
  await entry.hover();
  await entry.locator(`.actions .action-label[aria-label^="${KNOWLEDGE_VIEW.deleteActionTitle}"]`).click({ timeout: 5_000 });
  const asked = await wb.answerDialog(KNOWLEDGE_VIEW.deleteButton);
  ok(`deleting asks first ("${asked}")`);
  await waitFor("the entry to leave the Knowledge tree", async () =>
    !(await wb.treeRows(KNOWLEDGE_VIEW.name)).some((row) => KNOWLEDGE_VIEW.entryRow(KB_TITLE).test(row.label)));
  ok("the deleted entry is gone from the Knowledge tree");
}

/** The test-only probe extension (e2e/probe), packaged for this run. */
function packageProbe(work) {
  const vsix = join(work, "probe.vsix");
  const vsce = join(CLIENT, "node_modules", ".bin", "vsce");
  const made = spawnSync(vsce, ["package", "--no-dependencies", "--allow-missing-repository", "--skip-license", "-o", vsix],
    { cwd: join(CLIENT, "e2e", "probe"), encoding: "utf8" });
  if (made.status !== 0) throw new Error(`packaging e2e/probe failed:\n${made.stdout}${made.stderr}`);
  return vsix;
}

/** Agent mode's view of the tools: the probe lists vscode.lm.tools and calls ours with
 * vscode.lm.invokeTool from inside the extension host (code-server has no chat of its own). */
async function languageModelTools() {
  await wb.runCommand(PROBE_COMMAND);
  const report = await waitFor("the probe's report", () => existsSync(probeReport) && JSON.parse(readFileSync(probeReport, "utf8")), { timeout: 60_000 });
  const names = report.tools.map((tool) => tool.name);
  expect(names.includes("rag-lsp_searchCode") && names.includes("rag-lsp_getContext"), `vscode.lm.tools lacks rag-lsp's tools: ${names.join(", ")}`);
  ok(`vscode.lm.tools (VS Code ${report.version}) lists rag-lsp_searchCode and rag-lsp_getContext`);
  const firstFile = /\n\n(\S+):\d+-\d+ /.exec(report.search)?.[1];
  expect(firstFile === EXPECTED.file, `rag-lsp_searchCode did not answer with ${EXPECTED.file} first:\n${report.search}`);
  ok(`vscode.lm.invokeTool("rag-lsp_searchCode") answers with ${EXPECTED.file} first`);
  expect(/\$\.top_k = 0: must be at least 1/.test(report.badArgument), `a bad argument got: ${report.badArgument}`);
  ok("a bad tool argument is refused with the field and the rule");
  expect(report.context.includes(EXPECTED.file), `rag-lsp_getContext did not pack ${EXPECTED.file}:\n${report.context}`);
  ok("vscode.lm.invokeTool(\"rag-lsp_getContext\") packs the relevant code");
}

// ---- run ----------------------------------------------------------------------------------

try {
  rmSync(OUT, { recursive: true, force: true });
  fixtureRoot = mkdtempSync(join(tmpdir(), "rag-lsp-e2e-ws-"));
  const folder = join(fixtureRoot, "shop");
  writeFixture(folder);
  probeReport = join(fixtureRoot, "probe-report.json");
  await step(`start code-server with ${VSIX.replace(`${CLIENT}/`, "")} on the fixture`, async () => {
    wb = await startWorkbench({
      vsix: VSIX, folder, outDir: OUT, settings: { "ragLsp.server.command": [SERVER, "serve"] },
      extraVsix: [packageProbe(fixtureRoot)], env: { RAG_LSP_E2E_PROBE: probeReport, RAG_LSP_E2E_QUERY: QUERY },
    });
  });
  await step("status bar: wait for the first index", waitForReady);
  await step(`open the "${CONTAINER_TITLE}" view container`, openContainer);
  await step(`search "${QUERY}"`, searchInTree);
  await step("click a range row", openRangeFromTree);
  await step(`activate the ${MODE} mode without a chat model`, modeContext);
  await step(`add lines ${KB_LINES.start}–${KB_LINES.end} of ${KB_FILE} to the ${MODE} knowledge base`, addToKnowledgeBase);
  await step("delete the knowledge entry", deleteKnowledgeEntry);
  await step("agent-mode tools, called in the extension host", languageModelTools);
  await wb.close();
  clearTimeout(watchdog);
  rmSync(fixtureRoot, { recursive: true, force: true });
  console.log(`\ne2e: passed in ${secs(Date.now() - started)}; ${checked.length} checks:`);
  for (const point of checked) console.log(`  ✓ ${point}`);
  console.log(`screenshots and logs: ${OUT}`);
} catch (err) {
  await fail(err);
}
