#!/usr/bin/env node
// The real-VS-Code end-to-end test: the packaged extension (dist/rag-lsp.vsix) in code-server,
// against this checkout's `.venv/bin/rag-lsp serve`, driven in headless Chromium like a user.
// Each step prints its time; a failure prints the step, the last screenshot, what is on screen
// and the tail of the extension's log, and exits 1. Screenshots and logs: test-results/e2e/.
//   npm run package && node e2e/install-code-server.mjs && node e2e/scenario.mjs
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { EXPECTED, KB_FILE, KB_LINES, KB_TITLE, QUERY, writeFixture } from "./fixture.mjs";
import {
  COMMANDS, CONTAINER_TITLE, CONTEXT_DOCUMENT, KNOWLEDGE_PROMPTS, KNOWLEDGE_VIEW, LM_TOOLS_LOG, RESULTS_VIEW,
  SEARCH_WEBVIEW, STATUS, uiEdition,
} from "./ui.mjs";
import { escapeRegExp, startWorkbench, waitFor } from "./workbench.mjs";

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

const edition = uiEdition(JSON.parse(readFileSync(join(CLIENT, "package.json"), "utf8")));
const checked = [];
const notInBuild = [];
const started = Date.now();
let wb;
let current = "start";

const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
function ok(point) { checked.push(point); }
let notes = [];
/** A line printed under the step's result. */
function note(text) { notes.push(text); }
function skip(point) { notInBuild.push(point); note(`not in this build: ${point}`); }
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
  await waitFor('the status bar item to read "rag: ready"', async () => {
    const text = await statusText();
    if (text && seen[seen.length - 1] !== text) seen.push(text);
    if (text && /error|stopped|degraded/.test(text)) throw new Error(`the index reports "${text}"`);
    return text && STATUS.ready.test(text);
  }, { timeout: STATUS.readyWithinMs, interval: 200 });
  note(seen.join(" → "));
  ok('status bar item reaches "rag: ready"');
}

async function openContainer() {
  await wb.openViewContainer(CONTAINER_TITLE);
  const panes = edition.resultsTree ? [RESULTS_VIEW.name, KNOWLEDGE_VIEW.name].filter((name, i) => i === 0 || edition.knowledgeTree) : ["Search"];
  for (const name of panes) await wb.pane(name).waitFor({ state: "visible", timeout: 10_000 });
  ok(`the "${CONTAINER_TITLE}" view container shows ${panes.join(" and ")}`);
  if (!edition.resultsTree) skip(`views ${RESULTS_VIEW.id} ("Results") and ${KNOWLEDGE_VIEW.id} ("Knowledge")`);
}

/** Contract: a focused quick input; results fill the Results tree while typing; Enter focuses the tree. */
async function searchInTree() {
  await wb.runCommand(COMMANDS.search);
  await waitFor("the search box to open, focused", async () => {
    const input = await wb.quickInput();
    return input && input.focused && !input.value.startsWith(">");
  });
  await wb.typeInQuickInput(QUERY);
  await wb.treeRow(RESULTS_VIEW.name, RESULTS_VIEW.fileRow(EXPECTED.file), 30_000);
  ok("results appear in the Results tree while typing");
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

/** Contract: a file row's children are its ranges; clicking one selects exactly that range. */
async function openRangeFromTree() {
  const fileRow = await wb.treeRow(RESULTS_VIEW.name, RESULTS_VIEW.fileRow(EXPECTED.file));
  if ((await fileRow.getAttribute("aria-expanded")) === "false") await fileRow.click();
  const rows = await wb.treeRows(RESULTS_VIEW.name);
  const at = rows.findIndex((row) => RESULTS_VIEW.fileRow(EXPECTED.file).test(row.label));
  const child = rows.slice(at + 1).find((row) => RESULTS_VIEW.rangeRow.test(row.label));
  expect(child && child.level === rows[at].level + 1, `no range row under ${EXPECTED.file}: ${JSON.stringify(rows)}`);
  const [, , first, last] = child.label.match(RESULTS_VIEW.rangeRow).map((part, i) => (i >= 2 ? Number(part) : part));
  await (await wb.treeRow(RESULTS_VIEW.name, new RegExp(`^${escapeRegExp(child.label)}$`))).click();
  await checkSelection(first, last, `the row "${child.label}"`);
}

/** Before the tree views: the webview sidebar, typed into and clicked. */
async function searchInWebview() {
  await wb.runCommand(COMMANDS.search);
  const frame = await waitFor("the search sidebar's page", async () => {
    for (const candidate of wb.page.frames()) {
      if ((await candidate.title().catch(() => "")) === SEARCH_WEBVIEW.frameTitle) return candidate;
    }
    return undefined;
  });
  await frame.locator(SEARCH_WEBVIEW.input).click();
  await wb.page.keyboard.type(QUERY, { delay: 15 });
  const first = await waitFor("results in the search sidebar", async () =>
    (await frame.locator(SEARCH_WEBVIEW.groupHeaders).first().getAttribute("title", { timeout: 500 })) ?? undefined, { timeout: 30_000 });
  expect(first === EXPECTED.file, `the first result should be ${EXPECTED.file}, got ${first}`);
  ok(`the first result in the search sidebar is ${first}`);
  skip('"rag-lsp: Search workspace" opens a quick input; results in the Results tree; Enter focuses it');
  await wb.screenshot("results-sidebar.png");
  wb.searchFrame = frame;
}

async function openRangeFromWebview() {
  const row = wb.searchFrame.locator(SEARCH_WEBVIEW.rows).first();
  const label = await row.getAttribute("aria-label");
  const [, first, last] = label.match(/L(\d+)(?:–(\d+))?/).map(Number);
  await row.click();
  await checkSelection(first, last || first, `the result "${label}"`);
  skip("range rows in the Results tree (aria-label \"<label>, lines A to B\")");
}

async function checkSelection(first, last, what) {
  expect(first === EXPECTED.startLine, `${what} should start at line ${EXPECTED.startLine} (${EXPECTED.symbol})`);
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
}

/** No chat model in code-server: the packed context opens in an editor. */
async function activateMode() {
  await wb.runCommand(COMMANDS.activateMode);
  await wb.waitForQuickInput(/mode/i);
  await wb.pickQuickItem(MODE);
  // With no file open the command asks what the context is for.
  await wb.waitForQuickInput(CONTEXT_DOCUMENT.askForQuery);
  await wb.typeInQuickInput(CONTEXT_QUERY);
  await wb.page.keyboard.press("Enter");
  return waitFor("an editor with the packed context", async () => (await wb.editorTabs()).find((tab) =>
    tab.active && (CONTEXT_DOCUMENT.tab(MODE).test(tab.label) || CONTEXT_DOCUMENT.untitledTab.test(tab.title))), { timeout: 30_000 });
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
  if (!CONTEXT_DOCUMENT.tab(MODE).test(tab.label)) {
    skip(`the context as a read-only document rag-lsp-context:/${MODE}.md, one tab per mode (opened: "${tab.label}")`);
    return;
  }
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
  await wb.runCommand(COMMANDS.addToKnowledgeBase);
  await wb.waitForQuickInput(KNOWLEDGE_PROMPTS.pickMode);
  await wb.pickQuickItem(MODE);
  await wb.waitForQuickInput(KNOWLEDGE_PROMPTS.title);
  await wb.typeInQuickInput(KB_TITLE);
  await wb.page.keyboard.press("Enter");
  if (!edition.knowledgeTree) {
    await waitFor("the confirmation", async () => (await wb.notifications()).some((text) => KNOWLEDGE_PROMPTS.added(MODE).test(text)));
    ok(`"${COMMANDS.addToKnowledgeBase}" adds the selection to the ${MODE} knowledge base (notification)`);
    await wb.screenshot("knowledge-added.png");
    skip(`the Knowledge tree (${KNOWLEDGE_VIEW.id}): mode row "${MODE}" with the entry, deleted through ${KNOWLEDGE_VIEW.deleteCommand} and a modal "Delete"`);
    return;
  }
  await wb.openViewContainer(CONTAINER_TITLE);
  const modeRow = await wb.treeRow(KNOWLEDGE_VIEW.name, KNOWLEDGE_VIEW.modeRow(MODE), 20_000);
  if ((await modeRow.getAttribute("aria-expanded")) === "false") await modeRow.click();
  await wb.treeRow(KNOWLEDGE_VIEW.name, KNOWLEDGE_VIEW.entryRow(KB_TITLE), 20_000);
  ok(`the Knowledge tree shows "${MODE}" with the entry "${KB_TITLE}"`);
  await wb.screenshot("knowledge-view.png");
}

async function deleteKnowledgeEntry() {
  const entry = await wb.treeRow(KNOWLEDGE_VIEW.name, KNOWLEDGE_VIEW.entryRow(KB_TITLE));
  await entry.click({ button: "right" });
  const item = wb.page.locator(".monaco-menu .action-item .action-label", { hasText: KNOWLEDGE_VIEW.deleteMenuItem }).first();
  await item.waitFor({ state: "visible", timeout: 5_000 });
  await item.click();
  const asked = await wb.answerDialog(KNOWLEDGE_VIEW.deleteButton);
  ok(`deleting asks first ("${asked.split("\n")[0]}")`);
  await waitFor("the entry to leave the Knowledge tree", async () =>
    !(await wb.treeRows(KNOWLEDGE_VIEW.name)).some((row) => KNOWLEDGE_VIEW.entryRow(KB_TITLE).test(row.label)));
  ok("the deleted entry is gone from the Knowledge tree");
}

function languageModelTools() {
  if (LM_TOOLS_LOG.test(wb.extensionLog(10_000))) ok("the extension logged its language model tools as registered");
  else note("not checked: language model tools (the extension logs nothing about them; code-server has no chat)");
}

// ---- run ----------------------------------------------------------------------------------

try {
  rmSync(OUT, { recursive: true, force: true });
  const folder = join(mkdtempSync(join(tmpdir(), "rag-lsp-e2e-ws-")), "shop");
  writeFixture(folder);
  const ui = edition.resultsTree ? "tree views" : "webview sidebar";
  await step(`start code-server with ${VSIX.replace(`${CLIENT}/`, "")} (${ui} build) on the fixture`, async () => {
    wb = await startWorkbench({ vsix: VSIX, folder, outDir: OUT, settings: { "ragLsp.server.command": [SERVER, "serve"] } });
  });
  await step("status bar: wait for the first index", waitForReady);
  await step(`open the "${CONTAINER_TITLE}" view container`, openContainer);
  if (edition.resultsTree) {
    await step(`search "${QUERY}" into the Results tree`, searchInTree);
    await step("click a range row", openRangeFromTree);
  } else {
    await step(`search "${QUERY}" in the sidebar`, searchInWebview);
    await step("click a result", openRangeFromWebview);
  }
  await step(`activate the ${MODE} mode without a chat model`, modeContext);
  await step(`add lines ${KB_LINES.start}–${KB_LINES.end} of ${KB_FILE} to the ${MODE} knowledge base`, addToKnowledgeBase);
  if (edition.knowledgeTree) await step("delete the knowledge entry", deleteKnowledgeEntry);
  await step("language model tools", languageModelTools);
  await wb.close();
  clearTimeout(watchdog);
  rmSync(dirname(folder), { recursive: true, force: true });
  console.log(`\ne2e: passed in ${secs(Date.now() - started)}; ${checked.length} checks:`);
  for (const point of checked) console.log(`  ✓ ${point}`);
  if (notInBuild.length) {
    console.log("UI contract points this build does not have yet:");
    for (const point of notInBuild) console.log(`  - ${point}`);
  }
  console.log(`screenshots and logs: ${OUT}`);
} catch (err) {
  await fail(err);
}
