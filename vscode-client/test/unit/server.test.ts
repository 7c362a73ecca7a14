// RagServer with the real vscode-languageclient and a fake server process (fixtures/).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ExtensionContext } from "vscode";
import { RagServer } from "../../src/server";
import { fake, Uri, workspace } from "./vscode-stub";

const FIXTURE = join(__dirname, "fixtures", "fake-lsp-server.cjs");
const folder = mkdtempSync(join(tmpdir(), "rag-lsp-server-test-"));
let server: RagServer;

const until = async (condition: () => boolean, ms = 10_000) => {
  for (const end = Date.now() + ms; !condition() && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
  expect(condition()).toBe(true);
};
const pid = async () => (await server.request<{ pid: number }>("rag/status")).pid;

beforeEach(() => {
  fake.reset();
  delete process.env.FAKE_SERVER;
  fake.state.settings["ragLsp.server.command"] = [process.execPath, FIXTURE];
  workspace.workspaceFolders = [{ uri: Uri.file(folder), name: "ws", index: 0 }];
  server = new RagServer({ storageUri: Uri.file("/storage/ws"), subscriptions: [] } as unknown as ExtensionContext);
});
afterEach(async () => { await server.stop(); });

describe("RagServer", () => {
  it("[defects 10, 13] starts the server with the user's settings, forwards rag/indexStatus, and takes no $/progress", async () => {
    Object.assign(fake.state.settings, { "ragLsp.topK": 3, "ragLsp.context.reserveTokens": 50 });
    fake.state.defaults["ragLsp.searchMode"] = "hybrid";
    const states: string[] = [];
    server.onDidChangeState((state) => states.push(state));
    await server.start();
    expect(server.state).toBe("running");
    await until(() => server.status !== undefined);
    expect(server.status?.state).toBe("ready");
    expect(JSON.parse(server.status!.message)).toEqual({
      initializationOptions: { topK: 3, indexPath: "/storage/ws" },
      pulled: [{ topK: 3 }],
      // Indexing progress shows in our one status bar item, not as a second one from $/progress.
      workDoneProgress: false,
    });
    expect(states).toEqual(["starting", "running"]);
  });

  it("shows the server's messages with their links disarmed (VS Code runs `command:` links)", async () => {
    await server.start();
    await server.request("test/showMessage", { type: 2, message: "unknown setting `[Fix it](command:workbench.action.terminal.new)`" });
    await until(() => fake.state.messages.length > 0);
    const [shown] = fake.state.messages;
    expect(shown.level).toBe("warning");
    expect(shown.text).toContain("[Fix it]\u200B(command:");
    expect(shown.text).not.toMatch(/\]\(command:/);
  });

  it("sends {} for a request without params, and params as given", async () => {
    await server.start();
    const paramsOf = async (...args: [] | [unknown]) => (await server.request<{ params: unknown }>("rag/status", ...args)).params;
    expect(await paramsOf()).toEqual({});
    expect(await paramsOf({ full: true })).toEqual({ full: true });
  });

  it("restarts a crashed server 4 times, then stops and says so once", async () => {
    await server.start();
    const pids = [await pid()];
    for (let crash = 1; crash <= 4; crash++) {
      await server.request("test/crash").catch(() => undefined);
      await until(() => server.state === "running" && server.status !== undefined);
      pids.push(await pid());
    }
    expect(new Set(pids).size).toBe(5);
    await server.request("test/crash").catch(() => undefined);
    await until(() => fake.state.messages.length > 0);
    expect(server.state).toBe("stopped");
    expect(fake.state.messages).toEqual([expect.objectContaining({ level: "error", actions: ["Show log", "Restart server"] })]);
    expect(fake.state.messages[0].text).toContain("stopped 5 times in 3 minutes");
    await expect(server.request("rag/status")).rejects.toThrow(/not running/);
  });

  it("explains a server that exits while starting, once, and does not restart it", async () => {
    process.env.FAKE_SERVER = "exit-at-start";
    // vscode-languageclient 9 leaves two promises rejected and unhandled when the server dies
    // during initialize (the extension host only logs them); vitest would fail the run on them.
    const vitestListeners = process.listeners("unhandledRejection");
    const unhandled: string[] = [];
    process.removeAllListeners("unhandledRejection");
    process.on("unhandledRejection", (err) => unhandled.push(String(err)));
    try {
      await server.start();
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      process.removeAllListeners("unhandledRejection");
      vitestListeners.forEach((listener) => process.on("unhandledRejection", listener));
    }
    expect(unhandled.every((e) => /connection got disposed|Client is not running/.test(e))).toBe(true);
    expect(server.state).toBe("stopped");
    const ours = fake.state.messages.filter((m) => m.text.startsWith("rag-lsp: could not start"));
    expect(ours).toHaveLength(1);
    expect(fake.state.messages).toEqual(ours); // [defect 8] not also the language client's own
    expect(ours[0].text).toContain("ragLsp.server.command");
    expect(ours[0].actions).toEqual(["Show log", "Open settings"]);
  });

  it("[defect 8] keeps the fix in a start failure's message however long the command or reason", async () => {
    fake.state.settings["ragLsp.server.command"] = [`/${"very-long-folder-name/".repeat(20)}rag-lsp`, "serve"];
    await server.start();
    const [shown] = fake.state.messages;
    expect(shown.text.length).toBeLessThanOrEqual(240);
    expect(shown.text).toMatch(/^rag-lsp: could not start `\/very-long-folder-name.*… Check ragLsp\.server\.command: the program must exist/);
  });

  it("says how to install the server when it is not on PATH", async () => {
    fake.state.settings["ragLsp.server.command"] = [];
    const path = process.env.PATH;
    process.env.PATH = "/nonexistent";
    try {
      await server.start();
    } finally {
      process.env.PATH = path;
    }
    expect(server.state).toBe("stopped");
    expect(fake.state.messages[0].text).toMatch(/could not start `rag-lsp serve`: rag-lsp was not found.*ragLsp\.server\.command/);
  });

  it("restarts cleanly when asked while still starting (settings changed at start-up)", async () => {
    const starting = server.start();
    await server.restart();
    await starting;
    expect(server.state).toBe("running");
    expect(fake.state.messages).toEqual([]);
    expect(await pid()).toBeGreaterThan(0);
  });

  it("[defect 14] restarts on request, with a fresh process, and logs no error for it", async () => {
    await server.start();
    const before = await pid();
    await server.restart();
    expect(server.state).toBe("running");
    expect(await pid()).not.toBe(before);
    expect(fake.state.outputErrors).toEqual([]);
    expect(fake.state.messages).toEqual([]);
  });

  it("[defect 6] opens the server settings where a remote window lists machine settings", async () => {
    const { openServerSettings } = await import("../../src/server");
    await openServerSettings();
    (await import("./vscode-stub")).env.remoteName = "code-server";
    await openServerSettings();
    expect(fake.state.executed.map((e) => [e.command, e.args[0]])).toEqual([
      ["workbench.action.openSettings", "@ext:rag-lsp.rag-lsp ragLsp.server"],
      ["workbench.action.openRemoteSettings", "@ext:rag-lsp.rag-lsp ragLsp.server"],
    ]);
  });
});
