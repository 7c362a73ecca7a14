// Drives the real sidebar page (renderSidebarHtml + media/) in headless Chromium, with a stub
// `acquireVsCodeApi` that records what the page posts to the extension.

import { readFile } from "fs/promises";
import { createServer, type Server } from "http";
import type { AddressInfo } from "net";
import * as path from "path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { FromWebview, ToWebview } from "../../src/messages";
import { groupByFile } from "../../src/results";
import { nonce, renderSidebarHtml } from "../../src/sidebarHtml";
import { clientUri, lines, sampleResponse, status } from "./fixtures";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-sync",
];
const ROOT = path.resolve(__dirname, "../..");
const SCREENSHOT = path.join(ROOT, "test-results", "sidebar.png");

let server: Server;
let origin: string;
let browser: Browser;
let page: Page;
let problems: string[];

/** Serves the page as the extension would, plus media/ and a theme standing in for VS Code's. */
async function startServer(): Promise<void> {
  server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", origin);
    if (url.pathname === "/") {
      const html = renderSidebarHtml({
        nonce: nonce(),
        cspSource: origin,
        scriptUri: `${origin}/media/sidebar.js`,
        styleUri: `${origin}/media/sidebar.css`,
      }).replace("</head>", `<link rel="stylesheet" href="${origin}/test/browser/theme-dark.css">\n</head>`);
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(html);
      return;
    }
    if (url.pathname === "/favicon.ico") {
      res.writeHead(204).end(); // the browser asks for it; a webview would not
      return;
    }
    const allowed = ["/media/", "/test/browser/"].some((prefix) => url.pathname.startsWith(prefix));
    try {
      if (!allowed || url.pathname.includes("..")) throw new Error("not served");
      const body = await readFile(path.join(ROOT, url.pathname));
      const type = url.pathname.endsWith(".js") ? "text/javascript" : "text/css";
      res.writeHead(200, { "content-type": type }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Stands in for the webview host: records posts, keeps state across reloads like hide/show. */
function stubVsCodeApi(): void {
  const w = window as unknown as Record<string, unknown>;
  w.__posted = [];
  w.__csp = [];
  document.addEventListener("securitypolicyviolation", (e) => {
    (w.__csp as string[]).push(`${e.violatedDirective} ${e.blockedURI}`);
  });
  w.acquireVsCodeApi = () => ({
    postMessage: (message: unknown) => (w.__posted as unknown[]).push(message),
    getState: () => JSON.parse(sessionStorage.getItem("state") ?? "null"),
    setState: (state: unknown) => sessionStorage.setItem("state", JSON.stringify(state)),
  });
}

async function openPage(): Promise<void> {
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => (window as any).__posted.some((m: FromWebview) => m.type === "ready"));
}

async function deliver(message: ToWebview): Promise<void> {
  await page.evaluate((m) => window.postMessage(m, "*"), message);
}

function resultsMessage(query = "follow redirects"): ToWebview {
  return { type: "results", query, response: sampleResponse, groups: groupByFile(sampleResponse.results) };
}

async function posted(): Promise<FromWebview[]> {
  return page.evaluate(() => (window as any).__posted);
}

beforeAll(async () => {
  await startServer();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
});

beforeEach(async () => {
  page = await browser.newPage({ viewport: { width: 340, height: 560 } });
  problems = [];
  page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
  page.on("pageerror", (e) => problems.push(e.message));
  await page.addInitScript(stubVsCodeApi);
  await openPage();
});

afterEach(async () => {
  const csp = await page.evaluate(() => (window as any).__csp as string[]);
  await page.close();
  expect(csp, "CSP violations").toEqual([]);
  expect(problems, "console errors").toEqual([]);
});

describe("sidebar page", () => {
  it("posts one debounced search while typing, and Enter searches at once", async () => {
    await page.locator("#query").pressSequentially("follow redirects", { delay: 40 });
    await page.waitForTimeout(400);
    expect((await posted()).filter((m) => m.type === "search")).toEqual([
      { type: "search", query: "follow redirects" },
    ]);

    await page.locator("#query").fill("retry");
    await page.locator("#query").press("Enter");
    const searches = (await posted()).filter((m) => m.type === "search");
    expect(searches.at(-1)).toEqual({ type: "search", query: "retry" });
    await page.waitForTimeout(400);
    expect((await posted()).filter((m) => m.type === "search")).toHaveLength(2);
  });

  it("does not search for a single character", async () => {
    await page.locator("#query").pressSequentially("f");
    await page.waitForTimeout(400);
    expect((await posted()).filter((m) => m.type === "search")).toEqual([]);
  });

  it("renders results grouped by file with ranges, scores and the best snippet", async () => {
    await deliver(resultsMessage());
    const groups = page.locator(".group");
    await expect.poll(() => groups.count()).toBe(3);
    const first = groups.nth(0);
    expect(await first.locator(".group-header").innerText()).toMatch(/client\.py\s+src\/http\s+repo/);
    expect(await first.locator(".range").allInnerTexts()).toEqual(["L12–18", "L40–52"]);
    expect(await first.locator(".score").allInnerTexts()).toEqual(["0.51", "0.31"]);
    expect(await first.locator("pre.snippet").innerText()).toContain("def follow_redirects(response, max_hops=5):");
    expect(await groups.nth(1).locator(".folder").innerText()).toBe("docs");
    expect(await groups.nth(2).locator(".range").innerText()).toBe("L81");
    expect(await page.locator("#summary").innerText()).toBe("3 files · 31 ms · hybrid");
  });

  it("posts open with the result's uri and LSP range on click", async () => {
    await deliver(resultsMessage());
    await page.locator(".group").nth(0).locator('[role="option"]').nth(1).click();
    expect((await posted()).at(-1)).toEqual({ type: "open", uri: clientUri, range: lines(39, 52) });
  });

  it("moves through results with the arrow keys, opens with Enter, returns with Escape", async () => {
    await deliver(resultsMessage());
    await page.locator(".group").first().waitFor();
    await page.locator("#query").focus();
    await page.keyboard.press("ArrowDown");
    const focused = () => page.evaluate(() => document.activeElement?.getAttribute("aria-label") ?? document.activeElement?.id);
    expect(await focused()).toMatch(/^src\/http\/client\.py L12–18/);
    await page.keyboard.press("ArrowDown");
    expect(await focused()).toMatch(/^src\/http\/client\.py L40–52/);
    expect(await page.locator('[aria-selected="true"]').count()).toBe(1);
    await page.keyboard.press("Enter");
    expect((await posted()).at(-1)).toEqual({ type: "open", uri: clientUri, range: lines(39, 52) });
    await page.keyboard.press("ArrowDown");
    expect(await focused()).toMatch(/^guide\/redirects\.md L3–9/);
    await page.keyboard.press("Escape");
    expect(await focused()).toBe("query");
  });

  it("shows the empty state, the partial notice and warnings", async () => {
    await deliver({ type: "results", query: "zebra", response: { ...sampleResponse, results: [] }, groups: [] });
    await expect.poll(() => page.locator("#summary").innerText()).toBe("Nothing relevant for “zebra”.");
    const partial = { ...sampleResponse, partial: true, warnings: ["filter languages: unknown language 'cobol'"] };
    await deliver({ type: "results", query: "q", response: partial, groups: groupByFile(partial.results) });
    await expect.poll(() => page.locator(".notice").allInnerTexts()).toEqual([
      "Indexing is still running: results may be incomplete.",
      "filter languages: unknown language 'cobol'",
    ]);
  });

  it("shows a search error", async () => {
    await deliver({ type: "error", query: "q", message: "rag/search is disabled in settings" });
    await expect.poll(() => page.locator(".notice.error").innerText()).toBe("rag/search is disabled in settings");
  });

  it("shows the index status, with the degraded reason in a warning box", async () => {
    await deliver({ type: "status", status: status("indexing", "", { percentage: 42 }) });
    await expect.poll(() => page.locator("#status").innerText()).toBe("Indexing 42% · 1,234 files");
    await deliver({ type: "status", status: status("degraded", "model file missing: models/bge-small.onnx") });
    const line = page.locator("#status");
    await expect.poll(() => line.innerText()).toBe("Lexical search only: model file missing: models/bge-small.onnx");
    expect(await line.getAttribute("class")).toContain("warning");
    expect(await line.isVisible()).toBe(true);
    await deliver({ type: "status", status: status("disabled", "") });
    await expect.poll(() => page.locator("#rebuild").isDisabled()).toBe(true);
  });

  it("posts rebuild from the button", async () => {
    await page.locator("#rebuild").click();
    expect((await posted()).at(-1)).toEqual({ type: "rebuild" });
  });

  it("keeps the query and results across hide/show (vscode state)", async () => {
    await page.locator("#query").fill("follow redirects");
    await deliver(resultsMessage());
    await page.locator(".group").first().waitFor();
    await openPage(); // a reload is what VS Code does when the view is shown again
    expect(await page.locator("#query").inputValue()).toBe("follow redirects");
    expect(await page.locator(".group").count()).toBe(3);
  });

  it("would notice a CSP violation (so the check after each test means something)", async () => {
    await page.evaluate(() => document.body.setAttribute("style", "color: red"));
    await expect.poll(() => page.evaluate(() => (window as any).__csp.length)).toBe(1);
    await page.evaluate(() => ((window as any).__csp = []));
    await expect.poll(() => problems.length).toBeGreaterThan(0);
    problems = []; // Chromium also logs the refusal to the console
  });

  it("looks right with results (screenshot)", async () => {
    await deliver({ type: "status", status: status("ready") });
    await page.locator("#query").fill("follow redirects");
    await deliver(resultsMessage());
    await page.locator(".group").first().waitFor();
    await page.locator("#query").press("ArrowDown");
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    // Notices and a degraded index, to look at their boxes too.
    const partial = { ...sampleResponse, partial: true, warnings: ["filter languages: unknown language 'cobol'"] };
    await deliver({ type: "status", status: status("degraded", "model file missing: models/bge-small.onnx") });
    await deliver({ type: "results", query: "q", response: partial, groups: groupByFile(partial.results) });
    await page.locator(".notice").first().waitFor();
    await page.screenshot({ path: SCREENSHOT.replace(".png", "-degraded.png"), fullPage: true });
  });
});
