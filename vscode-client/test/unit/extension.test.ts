// activate() wires everything package.json declares (with the fake server process).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ExtensionContext } from "vscode";
import { activate, deactivate } from "../../src/extension";
import { fake, Uri } from "./vscode-stub";

const manifest = JSON.parse(readFileSync(join(__dirname, "../../package.json"), "utf8"));

describe("activate", () => {
  it("registers the commands, views, chat participant, agent tools and one status bar item, and starts the server", async () => {
    fake.reset();
    fake.state.settings["ragLsp.server.command"] = [process.execPath, join(__dirname, "fixtures", "fake-lsp-server.cjs")];
    const memory = new Map<string, unknown>();
    const context = {
      subscriptions: [] as { dispose(): unknown }[], extensionUri: Uri.file("/ext"), storageUri: Uri.file("/storage"),
      workspaceState: { get: (k: string) => memory.get(k), update: async (k: string, v: unknown) => { memory.set(k, v); }, keys: () => [] },
    };
    await activate(context as unknown as ExtensionContext);

    const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
    expect([...fake.state.commands.keys()].sort()).toEqual(contributed);
    expect([...fake.state.treeViews.keys()].sort()).toEqual(manifest.contributes.views.ragLsp.map((v: { id: string }) => v.id).sort());
    expect(fake.state.contentProviders.has("rag-lsp")).toBe(true);
    expect([...fake.state.chatParticipants.keys()]).toEqual([manifest.contributes.chatParticipants[0].id]);
    expect([...fake.state.lmTools.keys()]).toEqual(manifest.contributes.languageModelTools.map((t: { name: string }) => t.name));
    expect(fake.state.statusBarItems).toHaveLength(1); // [defect 13] one item for one server
    const [item] = fake.state.statusBarItems;
    for (let i = 0; i < 200 && item.text !== "$(search) rag: ready"; i++) await new Promise((r) => setTimeout(r, 25));
    expect(item.text).toBe("$(search) rag: ready");
    const serverStates = () => fake.state.executed.filter((e) => e.command === "setContext").map((e) => e.args);
    expect(serverStates().at(-1)).toEqual(["ragLsp.serverState", "running"]);

    await deactivate();
    expect(item.text).toBe("$(debug-disconnect) rag: stopped");
    expect(serverStates().at(-1)).toEqual(["ragLsp.serverState", "stopped"]); // [defect 7] the views say so
    context.subscriptions.forEach((s) => s.dispose());
  });
});
