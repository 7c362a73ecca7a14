// What the client sends the server as settings, and how it finds the server to start.
// Pure functions over a configuration-shaped object, so tests need no editor.
import * as os from "node:os";

/** The server's settings: the properties of schemas/config.schema.json (a test checks). */
export const SERVER_SETTINGS = [
  "enabled", "extensions", "exclude", "useGitignore", "maxFileBytes", "chunkTokens",
  "chunkOverlapTokens", "chunkHeaders", "secretFilter", "topK", "threshold", "answerThreshold",
  "knowledgeThreshold", "searchMode",
  "rankLexicalWeight", "rankIdentifierLexicalWeight", "rankDefinitionBoost", "rankPathBoost",
  "rankFileAgreement", "rankTestPrior", "rankBenchmarkPrior",
  "rankDocsPrior", "rankExamplePrior", "rankLegacyPrior",
  "rankGeneratedPrior", "rankDataPrior", "rankReexportPrior", "rankInternalPrior",
  "indexPath", "modelDir", "embedBatchSize", "indexThreads", "embeddingCache",
  "embeddingCacheMegabytes", "exactQueries", "lexicalFirst", "extraModes",
] as const;

export const SECTION = "ragLsp";

/** The part of vscode.WorkspaceConfiguration used here. */
export interface ConfigLike {
  get<T>(key: string): T | undefined;
  inspect<T>(key: string): {
    globalValue?: T; workspaceValue?: T; workspaceFolderValue?: T;
  } | undefined;
}

/** The value the user set somewhere (folder over workspace over user), or undefined. */
export function userValue<T>(config: ConfigLike, key: string, includeWorkspace = true): T | undefined {
  const seen = config.inspect<T>(key);
  if (!seen) return undefined;
  if (!includeWorkspace) return seen.globalValue;
  return seen.workspaceFolderValue ?? seen.workspaceValue ?? seen.globalValue;
}

/**
 * Only the server settings the user set. Defaults are left out on purpose: the server ranks
 * the folder's .rag-lsp.json below the editor's settings, so sending VS Code's defaults would
 * silently override that file. Client-only keys (server.*, context.*) are left out too: the
 * server rejects unknown settings.
 */
export function explicitServerSettings(config: ConfigLike): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const key of SERVER_SETTINGS) {
    const value = userValue(config, key);
    if (value !== undefined) settings[key] = value;
  }
  return settings;
}

/** initializationOptions: the user's settings, with the index in the editor's workspace
 * storage unless the user chose a folder (the server adds one subfolder per folder). */
export function initializationOptions(config: ConfigLike, storagePath: string | undefined): Record<string, unknown> {
  const options = explicitServerSettings(config);
  if (options.indexPath === undefined && storagePath) options.indexPath = storagePath;
  return options;
}

export interface ServerCommand {
  command: string;
  args: string[];
  /** Which setting chose it, for messages ("set ragLsp.server.command to ..."). */
  source: string;
}

export interface CommandContext {
  workspaceFolder?: string;
  /** In an untrusted workspace its own settings must not pick an executable. */
  trusted: boolean;
  home?: string;
}

/** Expands ${workspaceFolder}, ${userHome} and a leading ~, as VS Code's own settings do. */
export function expandPath(value: string, context: CommandContext): string {
  const home = context.home ?? os.homedir();
  let expanded = value.replace(/\$\{userHome\}/g, home);
  if (context.workspaceFolder) expanded = expanded.replace(/\$\{workspaceFolder\}/g, context.workspaceFolder);
  return expanded.replace(/^~(?=$|[/\\])/, home);
}

function nonEmptyString(value: unknown): value is string {
  return typeof value === "string" && value.trim() !== "";
}

/**
 * ragLsp.server.command, else a Python interpreter (ragLsp.server.pythonPath, else the Python
 * extension's python.defaultInterpreterPath when the user set it) running the module, else
 * `rag-lsp serve` from PATH.
 */
export function resolveServerCommand(rag: ConfigLike, python: ConfigLike | undefined, context: CommandContext): ServerCommand {
  const expand = (value: string) => expandPath(value.trim(), context);
  const command = rag.get<unknown>("server.command");
  if (Array.isArray(command) && command.length > 0 && command.every(nonEmptyString)) {
    const [program, ...args] = command.map(expand);
    return { command: program, args, source: `${SECTION}.server.command` };
  }
  const moduleArgs = ["-m", "rag_lsp", "serve"];
  const pythonPath = rag.get<unknown>("server.pythonPath");
  if (nonEmptyString(pythonPath)) {
    return { command: expand(pythonPath), args: moduleArgs, source: `${SECTION}.server.pythonPath` };
  }
  // The Python extension's default ("python") is not a choice the user made.
  const interpreter = python && userValue<unknown>(python, "defaultInterpreterPath", context.trusted);
  if (nonEmptyString(interpreter) && interpreter.trim() !== "python") {
    return { command: expand(interpreter), args: moduleArgs, source: "python.defaultInterpreterPath" };
  }
  return { command: "rag-lsp", args: ["serve"], source: "PATH" };
}

/** Client-side numbers for sizing assistant context. */
export function contextSettings(config: ConfigLike): { reserveTokens: number; fallbackBudget: number } {
  const number = (key: string, fallback: number) => {
    const value = config.get<unknown>(key);
    return typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.floor(value) : fallback;
  };
  return { reserveTokens: number("context.reserveTokens", 2000), fallbackBudget: number("context.fallbackBudget", 4000) };
}
