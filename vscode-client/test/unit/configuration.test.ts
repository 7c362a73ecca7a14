import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(__dirname, "../..");
const SCHEMA_PATH = join(ROOT, "../schemas/config.schema.json");
const schema = JSON.parse(readFileSync(SCHEMA_PATH, "utf8"));
const manifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const properties: Record<string, Record<string, unknown>> = manifest.contributes.configuration.properties;

const MIRRORED = ["type", "default", "description", "enum", "enumDescriptions", "minimum", "maximum", "items", "uniqueItems"];
const CLIENT_ONLY = ["ragLsp.server.command", "ragLsp.server.pythonPath", "ragLsp.context.reserveTokens", "ragLsp.context.fallbackBudget"];

function syncConfig(...args: string[]) {
  return spawnSync(process.execPath, [join(ROOT, "scripts/sync-config.mjs"), ...args], { encoding: "utf8" });
}

describe("contributes.configuration agrees with schemas/config.schema.json", () => {
  it("has every schema property as ragLsp.<name>, with the same rules", () => {
    for (const [name, spec] of Object.entries<Record<string, unknown>>(schema.properties)) {
      const setting = properties[`ragLsp.${name}`];
      expect(setting, `ragLsp.${name}`).toBeDefined();
      for (const key of MIRRORED) expect(setting[key], `ragLsp.${name}.${key}`).toEqual(spec[key]);
    }
  });

  it("has nothing else but the client-only settings", () => {
    const server = Object.keys(schema.properties).map((name) => `ragLsp.${name}`);
    expect(Object.keys(properties).sort()).toEqual([...server, ...CLIENT_ONLY].sort());
  });

  it("keeps executables out of an untrusted workspace's reach", () => {
    expect(manifest.capabilities.untrustedWorkspaces.restrictedConfigurations).toEqual(["ragLsp.server.command", "ragLsp.server.pythonPath"]);
    expect(properties["ragLsp.server.command"].scope).toBe("machine-overridable");
  });

  it("is what scripts/sync-config.mjs generates", () => {
    const result = syncConfig("--check");
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  it("makes the script's check fail, naming the setting, when they drift", () => {
    const dir = mkdtempSync(join(tmpdir(), "rag-lsp-config-"));
    const drifted = structuredClone(manifest);
    drifted.contributes.configuration.properties["ragLsp.topK"].default = 99;
    delete drifted.contributes.configuration.properties["ragLsp.extraModes"];
    writeFileSync(join(dir, "package.json"), JSON.stringify(drifted));
    const result = syncConfig("--check", "--package", join(dir, "package.json"), "--schema", SCHEMA_PATH);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("ragLsp.topK.default: package.json has 99, schema says 10");
    expect(result.stderr).toContain("missing ragLsp.extraModes");
    expect(result.stderr).toContain("npm run sync-config");

    expect(syncConfig("--package", join(dir, "package.json"), "--schema", SCHEMA_PATH).status).toBe(0);
    expect(syncConfig("--check", "--package", join(dir, "package.json"), "--schema", SCHEMA_PATH).status).toBe(0);
  });
});
