#!/usr/bin/env node
// Writes package.json's contributes.configuration from ../schemas/config.schema.json (the
// server's single source of truth for settings) plus the client-only settings below.
//   node scripts/sync-config.mjs           update package.json
//   node scripts/sync-config.mjs --check   exit 1, listing the differences, if it is stale
// --package PATH and --schema PATH point at other files (tests use copies).
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const packagePath = resolve(option("--package", resolve(here, "../package.json")));
const schemaPath = resolve(option("--schema", resolve(here, "../../schemas/config.schema.json")));

// Keywords VS Code's settings editor understands; the rest of the schema stays server-side.
const COPIED = ["type", "default", "description", "enum", "enumDescriptions", "minimum", "maximum",
  "items", "uniqueItems", "minLength", "maxLength", "pattern", "patternErrorMessage"];

// Settings only the extension reads. Executables are machine-overridable and restricted in
// untrusted workspaces (package.json capabilities), so a cloned repository cannot pick one.
const CLIENT_SETTINGS = {
  "ragLsp.server.command": {
    type: "array", items: { type: "string" }, default: [], scope: "machine-overridable",
    markdownDescription: "Command that starts the server, as program and arguments, e.g. `[\"/path/to/rag-lsp/.venv/bin/rag-lsp\", \"serve\"]`. Empty: use `ragLsp.server.pythonPath`, else `python.defaultInterpreterPath` when set, else `rag-lsp serve` from PATH.",
  },
  "ragLsp.server.pythonPath": {
    type: "string", default: "", scope: "machine-overridable",
    markdownDescription: "Python interpreter with rag-lsp installed; the server runs as `<python> -m rag_lsp serve`. Ignored when `ragLsp.server.command` is set.",
  },
  "ragLsp.context.reserveTokens": {
    type: "integer", default: 2000, minimum: 0,
    description: "Tokens of the chat model's input kept free for the conversation when sizing workspace context.",
  },
  "ragLsp.context.fallbackBudget": {
    type: "integer", default: 4000, minimum: 1, maximum: 1000000,
    description: "Token budget for workspace context when no chat model is available to size it (the context then opens in an editor).",
  },
};

// Where the extension's behaviour differs from the schema's wording; VS Code shows
// markdownDescription instead of description, and description stays the schema's.
const EDITOR_NOTES = {
  indexPath: "Folder for the index. Unset: the extension's workspace storage, so the index stays out of the workspace (the command line uses `<workspace>/.rag-lsp`). A relative path resolves against the workspace root.",
};

function buildConfiguration(schema) {
  const properties = {};
  let order = 0;
  for (const [name, spec] of Object.entries(schema.properties)) {
    const setting = {};
    for (const key of COPIED) if (key in spec) setting[key] = spec[key];
    if (EDITOR_NOTES[name]) setting.markdownDescription = EDITOR_NOTES[name];
    properties[`ragLsp.${name}`] = { ...setting, order: order++ };
  }
  for (const [name, spec] of Object.entries(CLIENT_SETTINGS)) properties[name] = { ...spec, order: order++ };
  return { title: "rag-lsp", properties };
}

function differences(current, wanted) {
  const have = current?.properties ?? {};
  const lines = [];
  for (const name of Object.keys(wanted.properties)) {
    if (!(name in have)) lines.push(`  missing ${name}`);
    else if (!isDeepStrictEqual(have[name], wanted.properties[name])) {
      for (const key of new Set([...Object.keys(have[name]), ...Object.keys(wanted.properties[name])])) {
        if (!isDeepStrictEqual(have[name][key], wanted.properties[name][key])) {
          lines.push(`  ${name}.${key}: package.json has ${JSON.stringify(have[name][key])}, schema says ${JSON.stringify(wanted.properties[name][key])}`);
        }
      }
    }
  }
  for (const name of Object.keys(have)) if (!(name in wanted.properties)) lines.push(`  extra ${name} (not in the schema)`);
  if (current?.title !== wanted.title) lines.push(`  title: ${JSON.stringify(current?.title)} instead of ${JSON.stringify(wanted.title)}`);
  return lines;
}

const packageJson = JSON.parse(readFileSync(packagePath, "utf8"));
const wanted = buildConfiguration(JSON.parse(readFileSync(schemaPath, "utf8")));
const drift = differences(packageJson.contributes?.configuration, wanted);

if (args.includes("--check")) {
  if (drift.length) {
    console.error(`${packagePath}: contributes.configuration differs from ${schemaPath}:\n${drift.join("\n")}\n` +
      "Run `npm run sync-config` to regenerate it.");
    process.exit(1);
  }
  console.log("contributes.configuration matches the schema");
} else if (drift.length) {
  packageJson.contributes = { ...packageJson.contributes, configuration: wanted };
  writeFileSync(packagePath, JSON.stringify(packageJson, null, 2) + "\n");
  console.log(`updated ${packagePath}:\n${drift.join("\n")}`);
} else {
  console.log("contributes.configuration already matches the schema");
}
