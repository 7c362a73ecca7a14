// package.json's contributions against what the code registers and uses.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { KNOWLEDGE_VIEW_ID } from "../../src/knowledgeTree";
import { PARTICIPANT_ID } from "../../src/modes";
import { MODES } from "../../src/protocol";
import { RESULTS_VIEW_ID } from "../../src/resultsTree";
import { fake } from "./vscode-stub";

const manifest = JSON.parse(readFileSync(join(__dirname, "../../package.json"), "utf8"));

beforeEach(() => fake.reset());

describe("package.json", () => {
  it("declares the Results and Knowledge tree views in their own activity bar container", () => {
    expect(manifest.contributes.viewsContainers.activitybar).toEqual([{ id: "ragLsp", title: "rag-lsp", icon: "media/icon.svg" }]);
    expect(manifest.contributes.views.ragLsp.map((v: { id: string; type?: string }) => [v.id, v.type ?? "tree"]))
      .toEqual([[RESULTS_VIEW_ID, "tree"], [KNOWLEDGE_VIEW_ID, "tree"]]);
  });

  it("[defect 7] gives each server state its own welcome text in the Results view", () => {
    const welcome = manifest.contributes.viewsWelcome.filter((w: { view: string }) => w.view === RESULTS_VIEW_ID);
    const stopped = welcome.find((w: { when: string }) => w.when === "ragLsp.serverState == stopped");
    expect(stopped.contents).toContain("(command:ragLsp.restartServer)");
    expect(stopped.contents).toContain("(command:ragLsp.showLog)");
    expect(welcome.map((w: { when: string }) => w.when)).toContain("ragLsp.serverState == running");
  });

  it("offers delete and clear on the Knowledge view's rows, and hides row-only commands from the palette", () => {
    const menu = manifest.contributes.menus["view/item/context"];
    expect(menu).toContainEqual(expect.objectContaining({ command: "ragLsp.kb.delete", group: "inline", when: expect.stringContaining("viewItem == ragLsp.kbEntry") }));
    expect(menu).toContainEqual(expect.objectContaining({ command: "ragLsp.kb.clearMode", group: "inline", when: expect.stringContaining("viewItem == ragLsp.kbMode") }));
    const hidden = manifest.contributes.menus.commandPalette.filter((m: { when: string }) => m.when === "false").map((m: { command: string }) => m.command);
    expect(hidden.sort()).toEqual(["ragLsp.kb.clearMode", "ragLsp.kb.delete", "ragLsp.kb.open", "ragLsp.openResult", "ragLsp.showAllRanges"]);
  });

  it("[defect 16] has a 128×128 PNG icon and no placeholder repository", () => {
    expect(manifest.icon).toBe("media/icon.png");
    const png = readFileSync(join(__dirname, "../..", manifest.icon));
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([128, 128]);
    expect(JSON.stringify(manifest)).not.toMatch(/example\.invalid|placeholder/);
    expect(existsSync(join(__dirname, "../../LICENSE"))).toBe(true);
  });

  it("declares the chat participant with one command per built-in mode", () => {
    const [participant] = manifest.contributes.chatParticipants;
    expect(participant.id).toBe(PARTICIPANT_ID);
    expect(participant.name).toBe("rag");
    expect(participant.commands.map((c: { name: string }) => c.name)).toEqual([...MODES]);
  });

  it("targets VS Code 1.100+ and bundles everything into dist/extension.js", () => {
    expect(manifest.engines.vscode).toBe("^1.100.0");
    expect(manifest.devDependencies["@types/vscode"]).toBe("~1.100.0");
    expect(manifest.main).toBe("./dist/extension.js");
    expect(manifest.scripts.package).toContain("--no-dependencies");
  });
});
