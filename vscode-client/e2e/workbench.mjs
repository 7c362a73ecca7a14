// A real VS Code workbench for end-to-end tests: code-server (VS Code's server build) on
// 127.0.0.1 with the extension installed from its .vsix, driven in Debian's headless Chromium
// over the DevTools protocol (playwright-core; no browser is ever downloaded). The helpers act
// as a user does — command palette, quick input, clicks — and read what the user sees.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { codeServerDir, codeServerEntry, INSTALLED_MARKER } from "./cache.mjs";

const { chromium } = createRequire(import.meta.url)("playwright-core");

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--no-first-run", "--disable-sync"];

/** Settings that keep the workbench quiet and offline, plus the test's own. */
const BASE_SETTINGS = {
  "workbench.startupEditor": "none",
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "workbench.enableExperiments": false,
  "workbench.tips.enabled": false,
  "git.enabled": false,
  "update.mode": "none",
};

export const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

/** Thrown by a `waitFor` probe to stop waiting at once (other errors count as "not yet"). */
export class GiveUp extends Error {}

/** Polls `probe` until it returns something truthy; the error says what was awaited and the last value seen. */
export async function waitFor(what, probe, { timeout = 15_000, interval = 250 } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await probe();
      if (last) return last;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      last = `error: ${err instanceof Error ? err.message.split("\n")[0] : err}`;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout / 1000} s waiting for ${what}${last === undefined || last === false || last === null ? "" : ` (last seen: ${JSON.stringify(last)})`}`);
    await sleep(interval);
  }
}

/**
 * Starts code-server with `vsix` installed and `folder` open in Chromium.
 * options: { vsix, folder, settings (user settings.json), outDir (screenshots and logs),
 *   extraVsix (more extensions to install), env (added to code-server's and so to the
 *   extension host's environment) }
 */
export async function startWorkbench({ vsix, folder, settings = {}, outDir, extraVsix = [], env = {} }) {
  const dir = codeServerDir();
  if (!existsSync(join(dir, INSTALLED_MARKER))) {
    throw new Error(`code-server is not installed in ${dir}; run \`node e2e/install-code-server.mjs\` first`);
  }
  const work = mkdtempSync(join(tmpdir(), "rag-lsp-e2e-"));
  const userData = join(work, "user-data");
  const extensions = join(work, "extensions");
  mkdirSync(join(userData, "User"), { recursive: true });
  writeFileSync(join(userData, "User", "settings.json"), JSON.stringify({ ...BASE_SETTINGS, ...settings }, null, 2));
  // An empty config file, so code-server neither reads nor writes ~/.config/code-server.
  writeFileSync(join(work, "config.yaml"), "");
  const common = ["--config", join(work, "config.yaml"), "--user-data-dir", userData, "--extensions-dir", extensions];
  const entry = codeServerEntry(dir);

  for (const extension of [vsix, ...extraVsix]) {
    const install = spawnSync(process.execPath, [entry, ...common, "--install-extension", extension], { encoding: "utf8" });
    if (install.status !== 0 || !/successfully installed/.test(install.stdout)) {
      throw new Error(`installing ${extension} failed:\n${install.stdout}${install.stderr}`);
    }
  }

  // Port 0: the kernel picks a free port and code-server prints it.
  const server = spawn(process.execPath, [entry, ...common, "--bind-addr", "127.0.0.1:0", "--auth", "none",
    "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", "--ignore-last-opened", folder],
  { detached: true, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } }); // its own process group, to stop it whole
  let output = "";
  const collect = (chunk) => { output += chunk; };
  server.stdout.setEncoding("utf8").on("data", collect);
  server.stderr.setEncoding("utf8").on("data", collect);
  const workbench = new Workbench({ work, userData, server, outDir, serverOutput: () => output });
  try {
    const url = await waitFor("code-server to listen", () => {
      if (server.exitCode !== null) throw new Error(`code-server exited (${server.exitCode}):\n${output}`);
      return output.match(/HTTP server listening on (http:\/\/127\.0\.0\.1:\d+)/)?.[1];
    }, { timeout: 30_000 });
    workbench.browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const page = await workbench.browser.newPage({ viewport: { width: 1400, height: 900 } });
    workbench.page = page;
    page.on("pageerror", (err) => workbench.pageErrors.push(String(err)));
    await page.goto(`${url}/?folder=${encodeURIComponent(folder)}`);
    await page.waitForSelector(".monaco-workbench .part.statusbar", { timeout: 60_000 });
  } catch (err) {
    await workbench.close();
    throw err;
  }
  return workbench;
}

export class Workbench {
  constructor({ work, userData, server, outDir, serverOutput }) {
    Object.assign(this, { work, userData, server, outDir, serverOutput });
    this.browser = undefined;
    this.page = undefined;
    this.pageErrors = [];
    this.lastScreenshot = undefined;
  }

  // ---- commands and quick input ------------------------------------------------------------

  /** F1, the command's title ("rag-lsp: Search workspace"), Enter — on exactly that command. */
  async runCommand(title) {
    const { page } = this;
    await this.closeQuickInput();
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget .quick-input-box input");
    await input.waitFor({ state: "visible" });
    await input.fill(`>${title}`);
    const row = page.locator(".quick-input-widget .quick-input-list .monaco-list-row", {
      has: page.locator(".label-name", { hasText: new RegExp(`^${escapeRegExp(title)}$`) }),
    }).first();
    await row.waitFor({ state: "visible", timeout: 10_000 }).catch(() => {
      throw new Error(`the command palette has no command titled "${title}"`);
    });
    if (await row.evaluate((el) => el.classList.contains("focused"))) await page.keyboard.press("Enter");
    else await row.click();
  }

  /** Escape, only when a quick input is open: in an editor Escape would also drop the selection. */
  async closeQuickInput() {
    const widget = this.page.locator(".quick-input-widget");
    if (await widget.isVisible()) {
      await this.page.keyboard.press("Escape");
      await widget.waitFor({ state: "hidden", timeout: 5_000 });
    }
  }

  /** The open quick input (a quick pick or an input box), or undefined. */
  async quickInput() {
    const widget = this.page.locator(".quick-input-widget:visible");
    if (!(await widget.count())) return undefined;
    const texts = await widget.evaluate((el) => ({
      title: el.querySelector(".quick-input-title")?.textContent ?? "",
      placeholder: el.querySelector(".quick-input-box input")?.getAttribute("placeholder") ?? "",
      message: el.querySelector(".quick-input-message")?.textContent ?? "",
      value: el.querySelector(".quick-input-box input")?.value ?? "",
      focused: el.contains(document.activeElement),
      rows: [...el.querySelectorAll(".quick-input-list .monaco-list-row")].map((row) => row.getAttribute("aria-label") ?? ""),
    }));
    return texts;
  }

  /** Waits for a quick input whose title, placeholder or prompt matches `pattern`. */
  async waitForQuickInput(pattern, timeout = 15_000) {
    return waitFor(`a quick input matching ${pattern}`, async () => {
      const input = await this.quickInput();
      return input && pattern.test(`${input.title}\n${input.placeholder}\n${input.message}`) ? input : undefined;
    }, { timeout });
  }

  /** Types into the focused quick input, key by key, as a user does. */
  async typeInQuickInput(text, { replace = true } = {}) {
    const input = this.page.locator(".quick-input-widget .quick-input-box input");
    await input.focus();
    if (replace) await input.fill("");
    await this.page.keyboard.type(text, { delay: 15 });
  }

  /** In an open quick pick: the item whose label is `label`, chosen with the keyboard. */
  async pickQuickItem(label) {
    await this.typeInQuickInput(label);
    const row = this.page.locator(".quick-input-widget .quick-input-list .monaco-list-row", {
      has: this.page.locator(".label-name", { hasText: new RegExp(`^${escapeRegExp(label)}$`) }),
    }).first();
    await row.waitFor({ state: "visible", timeout: 10_000 });
    if (await row.evaluate((el) => el.classList.contains("focused"))) await this.page.keyboard.press("Enter");
    else await row.click();
  }

  // ---- views, trees, editors ---------------------------------------------------------------

  /** Clicks the activity bar item with this title (a view container). */
  async openViewContainer(title) {
    const item = this.page.locator(`.activitybar .action-item .action-label[aria-label="${title}"]`);
    await item.waitFor({ state: "visible", timeout: 15_000 });
    const checked = await item.evaluate((el) => el.closest(".action-item")?.classList.contains("checked"));
    if (!checked) await item.click();
    await this.page.mouse.move(700, 5); // away, so the item's hover does not cover the screenshots
  }

  /** The pane (a view inside the side bar) whose header names `viewName`. */
  pane(viewName) {
    return this.page.locator(".part.sidebar .pane", {
      has: this.page.locator(".pane-header .title", { hasText: new RegExp(`^${escapeRegExp(viewName)}$`, "i") }),
    });
  }

  /** The aria-labels of a tree view's visible rows, top to bottom. */
  async treeRows(viewName) {
    return this.pane(viewName).locator(".monaco-list-row").evaluateAll((rows) => rows
      .map((row) => ({ label: row.getAttribute("aria-label") ?? "", level: Number(row.getAttribute("aria-level") ?? 0),
        expanded: row.getAttribute("aria-expanded"), top: row.getBoundingClientRect().top }))
      .sort((a, b) => a.top - b.top)
      .map(({ top: _top, ...row }) => row));
  }

  /** Waits for the row of a tree view whose aria-label matches `pattern`; returns its locator. */
  async treeRow(viewName, pattern, timeout = 15_000) {
    const label = await waitFor(`a row matching ${pattern} in the ${viewName} view`,
      async () => (await this.treeRows(viewName)).find((row) => pattern.test(row.label))?.label, { timeout });
    return this.pane(viewName).locator(`.monaco-list-row[aria-label="${label.replace(/["\\]/g, "\\$&")}"]`).first();
  }

  /** The tabs of the editor area, by their labels. */
  async editorTabs() {
    return this.page.locator(".part.editor .tabs-container .tab").evaluateAll((tabs) => tabs.map((tab) => ({
      label: tab.querySelector(".label-name")?.textContent ?? "",
      title: tab.getAttribute("aria-label") ?? "",
      active: tab.classList.contains("active"),
    })));
  }

  /** The active editor's selection as the status bar shows it: "Ln 12, Col 1 (40 selected)". */
  async selectionStatus() {
    const item = this.page.locator('[id="status.editor.selection"]');
    if (!(await item.count())) return undefined;
    const text = (await item.innerText()).trim();
    const match = text.match(/Ln (\d+), Col (\d+)(?: \((\d+) selected\))?/);
    return match ? { text, line: Number(match[1]), column: Number(match[2]), selected: Number(match[3] ?? 0) } : { text };
  }

  /** Selects lines `start`..`end` (1-based, whole lines) in the active editor with Go to Line and the keyboard. */
  async selectLines(start, end) {
    const { page } = this;
    await page.keyboard.press("Control+G");
    const widget = page.locator(".quick-input-widget");
    await widget.locator(".quick-input-box input").fill(`:${start}`);
    // Enter only acts once Go to Line has read the number.
    await waitFor(`Go to Line to offer line ${start}`, async () => new RegExp(`line ${start}\\b`, "i").test(await widget.innerText()));
    await page.keyboard.press("Enter");
    await waitFor(`the cursor on line ${start}`, async () => (await this.selectionStatus())?.line === start);
    await page.keyboard.press("Home");
    await page.keyboard.press("Home"); // twice: to column 1 even when the line is indented
    for (let line = start; line < end; line++) await page.keyboard.press("Shift+ArrowDown");
    await page.keyboard.press("Shift+End");
  }

  /** Opens a workspace file with Quick Open (Ctrl+P). */
  async openFile(relativePath) {
    const { page } = this;
    await this.closeQuickInput();
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget .quick-input-box input");
    await input.waitFor({ state: "visible" });
    await input.fill(relativePath);
    const name = relativePath.split("/").pop();
    const row = page.locator(".quick-input-widget .quick-input-list .monaco-list-row", { hasText: name }).first();
    await row.waitFor({ state: "visible", timeout: 10_000 });
    await page.keyboard.press("Enter");
    await waitFor(`an editor on ${relativePath}`, async () => (await this.editorTabs()).some((tab) => tab.active && tab.label === name));
  }

  /** The first and last line (1-based) the active editor shows selected, read from what it renders. */
  async selectedLines() {
    const editor = this.page.locator(".part.editor .editor-group-container.active .monaco-editor").first();
    if (!(await editor.count())) return undefined;
    return editor.evaluate((el) => {
      // Selection highlights and line numbers are drawn in rows positioned at the same `top`.
      const tops = new Set([...el.querySelectorAll(".view-overlays > div")]
        .filter((row) => [...row.querySelectorAll(".selected-text")].some((part) => part.getBoundingClientRect().width > 0))
        .map((row) => row.style.top));
      const lines = [...el.querySelectorAll(".margin-view-overlays > div")]
        .filter((row) => tops.has(row.style.top))
        .map((row) => Number(row.querySelector(".line-numbers")?.textContent)).filter((n) => n > 0).sort((a, b) => a - b);
      return lines.length ? { first: lines[0], last: lines[lines.length - 1] } : undefined;
    });
  }

  /** The text of the active editor's visible lines. */
  async editorText() {
    const lines = this.page.locator(".part.editor .editor-group-container.active .monaco-editor .view-lines").first();
    if (!(await lines.count())) return "";
    return (await lines.evaluate((el) => [...el.querySelectorAll(".view-line")]
      .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top)).map((line) => line.textContent).join("\n")))
      .replace(/\u00a0/g, " ");
  }

  // ---- dialogs, notifications, evidence ----------------------------------------------------

  /** Answers a modal dialog by clicking the button labelled `button`; returns the dialog's text. */
  async answerDialog(button, timeout = 10_000) {
    const dialog = this.page.locator(".monaco-dialog-box");
    await dialog.waitFor({ state: "visible", timeout });
    // An extension's modal message lands in the detail line; the workbench's own in the text line.
    const text = (await dialog.locator(".dialog-message-container").innerText({ timeout })).trim().replace(/\s*\n\s*/g, " ");
    await dialog.locator(".monaco-button", { hasText: new RegExp(`^${escapeRegExp(button)}$`) }).first().click();
    await dialog.waitFor({ state: "hidden", timeout: 5_000 });
    return text;
  }

  /** The texts of the notification toasts on screen. */
  async notifications() {
    return this.page.locator(".notifications-toasts .notification-toast").evaluateAll((toasts) =>
      toasts.map((toast) => toast.querySelector(".notification-list-item-message")?.textContent ?? toast.textContent ?? ""));
  }

  /** Dismisses every notification, so the next one to show is known to be new. */
  async clearNotifications() {
    await this.runCommand("Notifications: Clear All Notifications");
    await waitFor("the notifications to go", async () => (await this.notifications()).length === 0, { timeout: 5_000 });
  }

  /** Saves a screenshot of the whole window under outDir; returns its path. */
  async screenshot(name) {
    mkdirSync(this.outDir, { recursive: true });
    const path = join(this.outDir, name);
    await this.page.screenshot({ path });
    this.lastScreenshot = path;
    return path;
  }

  /** The last lines of the extension's output channel ("rag-lsp"), from the log files under the user data folder. */
  extensionLog(lines = 40) {
    const files = this.extensionLogFiles();
    if (!files.length) return "(no rag-lsp log under the user data folder)";
    return files.map((file) => `--- ${file}\n${readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n")}`).join("\n");
  }

  /** logs/<session>/exthost<n>/<extension id>/rag-lsp.log: the extension's log output channel. */
  extensionLogFiles() {
    return findFiles(join(this.userData, "logs"), (path) => /exthost\d*\/[^/]*rag-lsp[^/]*\/[^/]*rag-lsp[^/]*\.log$/.test(path));
  }

  /** Stops the browser and code-server (its whole process group: the extension host and
   * rag-lsp too), copies the logs into outDir and deletes the temporary folders. */
  async close() {
    await this.browser?.close().catch(() => undefined);
    if (this.server.exitCode === null && this.server.signalCode === null) {
      const stopped = new Promise((done) => this.server.once("exit", done));
      try { process.kill(-this.server.pid, "SIGTERM"); } catch { /* already gone */ }
      const timer = setTimeout(() => { try { process.kill(-this.server.pid, "SIGKILL"); } catch { /* gone */ } }, 10_000);
      await stopped;
      clearTimeout(timer);
    }
    mkdirSync(this.outDir, { recursive: true });
    writeFileSync(join(this.outDir, "code-server.log"), this.serverOutput());
    const logs = this.extensionLogFiles();
    if (logs.length) writeFileSync(join(this.outDir, "rag-lsp.log"), logs.map((file) => readFileSync(file, "utf8")).join("\n"));
    rmSync(this.work, { recursive: true, force: true });
  }
}

function findFiles(dir, accept, found = []) {
  if (!existsSync(dir)) return found;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) findFiles(path, accept, found);
    else if (accept(path)) found.push(path);
  }
  return found;
}

export function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
