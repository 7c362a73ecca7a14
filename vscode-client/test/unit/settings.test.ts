import { beforeEach, describe, expect, it } from "vitest";
import { workspace } from "vscode";
import {
  contextSettings, explicitServerSettings, initializationOptions, resolveServerCommand, SERVER_SETTINGS,
} from "../../src/settings";
import { fake } from "./vscode-stub";

const rag = () => workspace.getConfiguration("ragLsp");
const python = () => workspace.getConfiguration("python");
const context = { workspaceFolder: "/work/repo", trusted: true, home: "/home/me" };

beforeEach(() => {
  fake.reset();
  // What package.json contributes: defaults must never be sent as if the user chose them.
  fake.state.defaults = { "ragLsp.topK": 10, "ragLsp.searchMode": "hybrid", "ragLsp.indexPath": null, "python.defaultInterpreterPath": "python" };
});

describe("settings sent to the server", () => {
  it("puts the index in workspace storage when the user chose no folder", () => {
    expect(initializationOptions(rag(), "/storage/abc/rag-lsp")).toEqual({ indexPath: "/storage/abc/rag-lsp" });
  });

  it("keeps the user's indexPath", () => {
    fake.state.settings["ragLsp.indexPath"] = "/big/disk/index";
    expect(initializationOptions(rag(), "/storage/abc")).toEqual({ indexPath: "/big/disk/index" });
  });

  it("sends no indexPath without a workspace (no storage)", () => {
    expect(initializationOptions(rag(), undefined)).toEqual({});
  });

  it("sends only what the user set, workspace over user, and no client-only keys", () => {
    Object.assign(fake.state.settings, { "ragLsp.topK": 5, "ragLsp.exclude": ["dist/"], "ragLsp.server.command": ["x"], "ragLsp.context.reserveTokens": 10 });
    fake.state.workspaceSettings["ragLsp.topK"] = 7;
    expect(explicitServerSettings(rag())).toEqual({ topK: 7, exclude: ["dist/"] });
  });

  it("passes false and 0 through (set, not missing)", () => {
    Object.assign(fake.state.settings, { "ragLsp.enabled": false, "ragLsp.threshold": 0 });
    expect(explicitServerSettings(rag())).toEqual({ enabled: false, threshold: 0 });
  });

  it("knows every server setting", () => {
    expect(SERVER_SETTINGS).toContain("extraModes");
    expect(new Set(SERVER_SETTINGS).size).toBe(SERVER_SETTINGS.length);
  });
});

describe("server command", () => {
  it("defaults to rag-lsp serve from PATH (the Python extension's default is ignored)", () => {
    expect(resolveServerCommand(rag(), python(), context)).toEqual({ command: "rag-lsp", args: ["serve"], source: "PATH" });
  });

  it("uses ragLsp.server.command first, expanding variables", () => {
    fake.state.settings["ragLsp.server.command"] = ["${workspaceFolder}/.venv/bin/rag-lsp", "serve", "-v"];
    fake.state.settings["ragLsp.server.pythonPath"] = "/usr/bin/python3";
    expect(resolveServerCommand(rag(), python(), context)).toEqual({
      command: "/work/repo/.venv/bin/rag-lsp", args: ["serve", "-v"], source: "ragLsp.server.command",
    });
  });

  it("ignores an empty or malformed command", () => {
    fake.state.settings["ragLsp.server.command"] = [];
    expect(resolveServerCommand(rag(), python(), context).source).toBe("PATH");
    fake.state.settings["ragLsp.server.command"] = ["", "serve"];
    expect(resolveServerCommand(rag(), python(), context).source).toBe("PATH");
  });

  it("runs the module with ragLsp.server.pythonPath", () => {
    fake.state.settings["ragLsp.server.pythonPath"] = "~/venvs/rag/bin/python";
    expect(resolveServerCommand(rag(), python(), context)).toEqual({
      command: "/home/me/venvs/rag/bin/python", args: ["-m", "rag_lsp", "serve"], source: "ragLsp.server.pythonPath",
    });
  });

  it("falls back to python.defaultInterpreterPath when the user set it", () => {
    fake.state.workspaceSettings["python.defaultInterpreterPath"] = "${workspaceFolder}/.venv/bin/python";
    expect(resolveServerCommand(rag(), python(), context)).toEqual({
      command: "/work/repo/.venv/bin/python", args: ["-m", "rag_lsp", "serve"], source: "python.defaultInterpreterPath",
    });
  });

  it("lets an untrusted workspace's settings pick no interpreter", () => {
    fake.state.workspaceSettings["python.defaultInterpreterPath"] = "./evil";
    expect(resolveServerCommand(rag(), python(), { ...context, trusted: false }).source).toBe("PATH");
    fake.state.settings["python.defaultInterpreterPath"] = "/opt/py/bin/python";
    expect(resolveServerCommand(rag(), python(), { ...context, trusted: false }).command).toBe("/opt/py/bin/python");
  });

  it("works without the Python extension", () => {
    expect(resolveServerCommand(rag(), undefined, context).command).toBe("rag-lsp");
  });
});

describe("context settings", () => {
  it("defaults, and rejects nonsense", () => {
    expect(contextSettings(rag())).toEqual({ reserveTokens: 2000, fallbackBudget: 4000 });
    Object.assign(fake.state.settings, { "ragLsp.context.reserveTokens": 500.7, "ragLsp.context.fallbackBudget": -3 });
    expect(contextSettings(rag())).toEqual({ reserveTokens: 500, fallbackBudget: 4000 });
  });
});
