// Where the real-VS-Code test keeps code-server between runs: one folder per version, so a
// version bump installs afresh and an old folder can simply be deleted.
import { homedir } from "node:os";
import { join } from "node:path";

/** The newest code-server whose `engines` still accept Node 20 (it bundles VS Code 1.100.3). */
export const CODE_SERVER_VERSION = "4.100.3";

export function codeServerDir(version = CODE_SERVER_VERSION) {
  const cache = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(cache, "rag-lsp", `code-server-${version}`);
}

/** The entry point inside an installed folder (run it with `node`). */
export function codeServerEntry(dir = codeServerDir()) {
  return join(dir, "node_modules", "code-server", "out", "node", "entry.js");
}

/** Written last by the installer: a folder without it is an interrupted install. */
export const INSTALLED_MARKER = ".installed";
