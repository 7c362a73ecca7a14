import { beforeEach, describe, expect, it } from "vitest";
import type { IndexStatus } from "../../src/protocol";
import { describeServerStatus } from "../../src/commands";
import { createStatusBar, describeStatus } from "../../src/statusBar";
import { FakeServer } from "./fakeServer";
import { fake, ThemeColor } from "./vscode-stub";

const folder = (uri: string, files: number) => ({ uri, state: "ready" as const, files, chunks: files * 3, indexPath: "/idx", lastUpdate: null, message: "" });
const status = (state: IndexStatus["state"], extra: Partial<IndexStatus> = {}): IndexStatus =>
  ({ state, files: 120, chunks: 1, message: `${state} message`, folders: [folder("file:///work/repo", 120)], ...extra });

describe("status bar text", () => {
  it.each([
    ["ready", "$(search) rag: ready", undefined],
    ["degraded", "$(warning) rag: degraded", "statusBarItem.warningBackground"],
    ["error", "$(error) rag: error", "statusBarItem.errorBackground"],
    ["disabled", "$(circle-slash) rag: disabled", undefined],
    ["starting", "$(sync~spin) rag: starting", undefined],
    ["indexing", "$(sync~spin) rag: indexing", undefined],
  ] as const)("%s", (state, text, background) => {
    const view = describeStatus("running", status(state));
    expect(view.text).toBe(text);
    expect(view.background).toBe(background);
    expect(view.tooltip).toContain(`${state} message`);
    expect(view.tooltip).toContain("1 folder, 120 files, 360 chunks indexed");
  });

  it("[defect 5] words the index size exactly as the status command does, from the same folders", () => {
    const folders = [folder("file:///a", 1), folder("file:///b", 1200)];
    const tooltip = describeStatus("running", status("ready", { folders, files: 7, chunks: 7 })).tooltip;
    const command = describeServerStatus({ state: "ready", enabled: true, folders, model: { id: "m", sha256: "", dimension: 384, loaded: true }, degradedReason: null, settingsProblems: [] });
    const counts = "2 folders, 1,201 files, 3,603 chunks indexed";
    expect(tooltip).toContain(counts);
    expect(command).toContain(counts);
  });

  it("[defect 5] labels a run's progress so it is not read as the index size", () => {
    const tooltip = describeStatus("running", status("indexing", { message: "412/1000 files, 3100 chunks embedded" })).tooltip;
    expect(tooltip).toContain("This run: 412/1000 files, 3100 chunks embedded");
  });

  it("shows the percentage while indexing", () => {
    expect(describeStatus("running", status("indexing", { percentage: 41.6 })).text).toBe("$(sync~spin) rag: indexing 42%");
    expect(describeStatus("running", status("indexing", { percentage: null })).text).toBe("$(sync~spin) rag: indexing");
  });

  it("lists folders in the tooltip when there are several", () => {
    const tooltip = describeStatus("running", status("ready", { folders: [folder("file:///a", 1), folder("file:///b", 2)] })).tooltip;
    expect(tooltip).toContain("2 folders, 3 files, 9 chunks indexed");
    expect(tooltip).toContain("/a: ready, 1 file\n/b: ready, 2 files");
  });

  it("shows the server's own state before any report and when it is not running", () => {
    expect(describeStatus("starting", undefined).text).toBe("$(sync~spin) rag: starting");
    expect(describeStatus("running", undefined).text).toBe("$(sync~spin) rag: starting");
    expect(describeStatus("stopped", status("ready"))).toMatchObject({ text: "$(debug-disconnect) rag: stopped", background: "statusBarItem.errorBackground" });
  });
});

describe("status bar item", () => {
  beforeEach(() => fake.reset());

  it("follows rag/indexStatus and the server's state, and opens the status on click", () => {
    const server = new FakeServer();
    createStatusBar(server);
    const [item] = fake.state.statusBarItems;
    expect(item.visible).toBe(true);
    expect(item.command).toBe("ragLsp.showStatus");
    server.setStatus(status("indexing", { percentage: 7 }));
    expect(item.text).toBe("$(sync~spin) rag: indexing 7%");
    server.setStatus(status("degraded"));
    expect(item.backgroundColor).toEqual(new ThemeColor("statusBarItem.warningBackground"));
    server.setStatus(status("ready"));
    expect(item.backgroundColor).toBeUndefined();
    // [defect 10] nothing about indexing stays once the run is over
    expect(item.text).toBe("$(search) rag: ready");
    expect(String(item.tooltip)).not.toMatch(/indexing|This run/);
    server.setState("stopped");
    expect(item.text).toBe("$(debug-disconnect) rag: stopped");
  });
});
