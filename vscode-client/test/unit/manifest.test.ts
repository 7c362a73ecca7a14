// package.json's contributions against what the code registers and uses.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { registerIndexCommands, SEARCH_VIEW_ID } from "../../src/commands";
import { ActiveMode, registerModeCommands } from "../../src/modeCommands";
import { PARTICIPANT_ID } from "../../src/modes";
import { MODES } from "../../src/protocol";
import { FakeServer } from "./fakeServer";
import { fake } from "./vscode-stub";

const manifest = JSON.parse(readFileSync(join(__dirname, "../../package.json"), "utf8"));
const memento = () => { const store = new Map<string, unknown>(); return { get: (k: string) => store.get(k), update: async (k: string, v: unknown) => { store.set(k, v); }, keys: () => [...store.keys()] }; };

beforeEach(() => fake.reset());

describe("package.json", () => {
  it("contributes exactly the commands the extension registers", () => {
    const server = new FakeServer();
    registerIndexCommands(server);
    registerModeCommands(server, new ActiveMode(memento()));
    const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command);
    expect([...fake.state.commands.keys()].sort()).toEqual(contributed.sort());
  });

  it("declares the sidebar view in its own activity bar container", () => {
    expect(manifest.contributes.viewsContainers.activitybar).toEqual([{ id: "ragLsp", title: "rag-lsp", icon: "media/icon.svg" }]);
    expect(manifest.contributes.views.ragLsp).toEqual([{ type: "webview", id: SEARCH_VIEW_ID, name: "Search" }]);
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
