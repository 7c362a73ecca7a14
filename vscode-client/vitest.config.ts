// Unit tests run in Node with the VS Code API replaced by a stub at the module boundary.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    alias: { vscode: fileURLToPath(new URL("./test/unit/vscode-stub.ts", import.meta.url)) },
  },
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
    // vscode-languageclient is loaded by Node's require, which the alias does not reach.
    setupFiles: ["test/unit/requireVscode.ts"],
  },
});
