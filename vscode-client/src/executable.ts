// Checks that the server's program exists before starting it: the language client's own
// message for a missing program ("couldn't create connection") does not say what to fix.
import * as fs from "node:fs";
import * as path from "node:path";

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, process.platform === "win32" ? fs.constants.F_OK : fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The program's full path if it can be run: a path as given, a bare name from PATH. */
export function findExecutable(program: string, env: NodeJS.ProcessEnv = process.env, cwd?: string): string | undefined {
  const extensions = process.platform === "win32" ? ["", ...(env.PATHEXT ?? ".EXE;.CMD;.BAT").split(";")] : [""];
  const candidates = (base: string) => extensions.map((ext) => base + ext);
  if (program.includes("/") || program.includes("\\")) {
    const full = path.resolve(cwd ?? process.cwd(), program);
    return candidates(full).find(isExecutable);
  }
  for (const dir of (env.PATH ?? "").split(path.delimiter).filter(Boolean)) {
    const found = candidates(path.join(dir, program)).find(isExecutable);
    if (found) return found;
  }
  return undefined;
}
