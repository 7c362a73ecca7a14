import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { findExecutable } from "../../src/executable";

const dir = mkdtempSync(join(tmpdir(), "rag-lsp-exe-"));
mkdirSync(join(dir, "bin"));
writeFileSync(join(dir, "bin", "rag-lsp"), "#!/bin/sh\n");
chmodSync(join(dir, "bin", "rag-lsp"), 0o755);
writeFileSync(join(dir, "bin", "notes.txt"), "not a program");
chmodSync(join(dir, "bin", "notes.txt"), 0o644);

describe.skipIf(process.platform === "win32")("finding the server program", () => {
  it("finds a bare name on PATH", () => {
    expect(findExecutable("rag-lsp", { PATH: `/nonexistent:${join(dir, "bin")}` })).toBe(join(dir, "bin", "rag-lsp"));
  });

  it("takes a path as given, relative to the workspace", () => {
    expect(findExecutable(join(dir, "bin", "rag-lsp"), { PATH: "" })).toBe(join(dir, "bin", "rag-lsp"));
    expect(findExecutable("bin/rag-lsp", { PATH: "" }, dir)).toBe(join(dir, "bin", "rag-lsp"));
  });

  it("rejects what is missing, not executable, or a folder", () => {
    expect(findExecutable("rag-lsp", { PATH: "/nonexistent" })).toBeUndefined();
    expect(findExecutable(join(dir, "bin", "notes.txt"), {})).toBeUndefined();
    expect(findExecutable(join(dir, "bin"), {})).toBeUndefined();
  });
});
