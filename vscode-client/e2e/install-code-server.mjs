#!/usr/bin/env node
// Installs code-server (VS Code's workbench served to a browser) for the real-VS-Code test,
// once per version, into ${XDG_CACHE_HOME:-~/.cache}/rag-lsp/code-server-<version>/.
//
// Only the npm registry is used. code-server's own postinstall would fetch things from GitHub
// (ripgrep, argon2 and kerberos prebuilds) and npm may skip dependency scripts anyway, so
// every package goes in with scripts off and the steps of its postinstall.sh are done here:
//   - @vscode/ripgrep downloads rg unless its cache holds the release tarball: we put one there
//     holding Debian's rg;
//   - native modules are compiled from source against this Node's headers (no header download).
// Everything happens in a staging folder renamed into place at the end, so an interrupted
// install is never mistaken for a finished one.
//   node e2e/install-code-server.mjs          (prints each step and its time)
import { execFileSync, spawnSync } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { CODE_SERVER_VERSION, codeServerDir, INSTALLED_MARKER } from "./cache.mjs";

const started = Date.now();
const seconds = (since) => `${((Date.now() - since) / 1000).toFixed(1)} s`;
const dir = codeServerDir();

function fail(message) {
  console.error(`install-code-server: ${message}`);
  process.exit(1);
}

if (existsSync(join(dir, INSTALLED_MARKER))) {
  console.log(`code-server ${CODE_SERVER_VERSION}: already installed in ${dir} (${seconds(started)})`);
  process.exit(0);
}

// ---- what the build needs from the machine -----------------------------------------------

const has = (command) => spawnSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" }).status === 0;
const pkgConfig = (name) => has("pkg-config") && spawnSync("pkg-config", ["--exists", name]).status === 0;
// The Debian packages code-server's npm install documents, each with a probe for what it provides.
const DEBIAN = [
  ["build-essential", "g++ and make, for node-gyp", () => has("g++") && has("make")],
  ["pkg-config", "pkg-config, for the native modules' build files", () => has("pkg-config")],
  ["python3", "python3, which node-gyp runs", () => has("python3")],
  ["libx11-dev", "pkg-config x11", () => pkgConfig("x11")],
  ["libxkbfile-dev", "pkg-config xkbfile", () => pkgConfig("xkbfile")],
  ["libsecret-1-dev", "pkg-config libsecret-1", () => pkgConfig("libsecret-1")],
  ["libkrb5-dev", "pkg-config krb5-gssapi, for the kerberos module", () => pkgConfig("krb5-gssapi")],
  ["ripgrep", "rg, which stands in for the rg @vscode/ripgrep would download", () => has("rg")],
];

function preflight() {
  const major = Number(process.versions.node.split(".")[0]);
  if (major !== 20) fail(`code-server ${CODE_SERVER_VERSION} needs Node 20 (its engines field); this is Node ${process.versions.node}.`);
  const missing = DEBIAN.filter(([, , probe]) => !probe());
  if (missing.length) {
    const names = missing.map(([name]) => name);
    fail(`missing Debian packages: ${missing.map(([name, what]) => `${name} (${what})`).join("; ")}.\n` +
      `Install them with \`make tools\` or \`sudo apt-get install ${names.join(" ")}\`.`);
  }
  // node-gyp downloads Node's headers from nodejs.org unless told where they are.
  const prefix = dirname(dirname(process.execPath));
  if (!existsSync(join(prefix, "include", "node", "node.h"))) {
    fail(`Node's C headers are not in ${prefix}/include/node (NodeSource's nodejs package has them; ` +
      "Debian's nodejs has them in libnode-dev); native modules cannot be built without a download.");
  }
  return prefix;
}

// ---- the install ----------------------------------------------------------------------------

const nodePrefix = preflight();
const staging = `${dir}.partial-${process.pid}`;
const tmp = join(staging, "tmp");
const logPath = join(staging, "install.log");
rmSync(staging, { recursive: true, force: true });
mkdirSync(tmp, { recursive: true });
writeFileSync(join(staging, "package.json"), JSON.stringify({ private: true }));

const env = {
  ...process.env,
  TMPDIR: tmp, // @vscode/ripgrep looks for its download cache in os.tmpdir()
  npm_config_nodedir: nodePrefix,
  npm_config_build_from_source: "true", // argon2 and kerberos: compile, do not fetch prebuilds
  npm_config_yes: "true", // node-pty's build would otherwise stop at an npx prompt
  npm_config_update_notifier: "false",
  npm_config_fund: "false",
  npm_config_audit: "false",
  JOBS: "max", // node-gyp: use every core
};

/** Runs one step, its output going to install.log; on failure shows the log's tail. */
function step(title, cwd, command, args) {
  const since = Date.now();
  console.log(`==> ${title}`);
  appendFileSync(logPath, `\n$ (cd ${cwd} && ${command} ${args.join(" ")})\n`);
  const run = spawnSync(command, args, { cwd, env, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
  appendFileSync(logPath, `${run.stdout ?? ""}${run.stderr ?? ""}`);
  if (run.status !== 0) {
    const tail = `${run.stdout ?? ""}${run.stderr ?? ""}`.trim().split("\n").slice(-40).join("\n");
    fail(`step "${title}" failed (exit ${run.status ?? run.signal}); last lines:\n${tail}\nFull log: ${logPath}`);
  }
  console.log(`    ${seconds(since)}`);
}

const pkg = join(staging, "node_modules", "code-server");
const vscode = join(pkg, "lib", "vscode");

step(`npm install code-server@${CODE_SERVER_VERSION} (scripts off)`, staging, "npm",
  ["install", "--ignore-scripts", "--save-exact", `code-server@${CODE_SERVER_VERSION}`]);
step("build argon2 (code-server's password hashing, loaded at start)", staging, "npm", ["rebuild", "--foreground-scripts", "argon2"]);
step("npm install VS Code's dependencies (lib/vscode, scripts off)", vscode, "npm", ["install", "--omit=dev", "--ignore-scripts"]);

// The tarball @vscode/ripgrep's postinstall would download, holding Debian's rg instead.
const rgPackage = JSON.parse(readFileSync(join(vscode, "node_modules", "@vscode", "ripgrep", "package.json"), "utf8"));
const rgTarget = { x64: "x86_64-unknown-linux-musl", arm64: "aarch64-unknown-linux-musl" }[process.arch];
if (!rgTarget) fail(`no ripgrep target known for ${process.arch}`);
const rgCache = join(tmp, `vscode-ripgrep-cache-${rgPackage.version}`);
mkdirSync(rgCache, { recursive: true });
const rg = execFileSync("sh", ["-c", "command -v rg"], { encoding: "utf8" }).trim();
// v13.0.0-10 is the ripgrep release @vscode/ripgrep 1.15.x asks for (lib/postinstall.js).
execFileSync("tar", ["czf", join(rgCache, `ripgrep-v13.0.0-10-${rgTarget}.tar.gz`), "-C", dirname(rg), "rg"]);

step("build VS Code's native modules and place rg (lib/vscode)", vscode, "npm", ["rebuild", "--foreground-scripts"]);

// postinstall.sh's links: VS Code looks for node_modules.asar, and for its CLI and browser helpers.
symlinkSync("node_modules", join(vscode, "node_modules.asar"));
symlinkSync("code-linux.sh", join(vscode, "bin", "remote-cli", "code-server"));
symlinkSync("browser-linux.sh", join(vscode, "bin", "helpers", "browser.sh"));

step("npm install the built-in extensions' dependencies (TypeScript)", join(vscode, "extensions"), "npm",
  ["install", "--omit=dev", "--ignore-scripts"]);
step("trim them as their postinstall does", join(vscode, "extensions"), "node", ["postinstall.mjs"]);

// Load every native module once, so a broken build fails here and not in the middle of a test.
const check = `
  const { createRequire } = require("node:module");
  const top = createRequire(${JSON.stringify(join(pkg, "package.json"))});
  const code = createRequire(${JSON.stringify(join(vscode, "package.json"))});
  top("argon2");
  for (const name of ["node-pty", "@vscode/spdlog", "native-watchdog", "kerberos", "@parcel/watcher"]) code(name);
  require("node:child_process").execFileSync(code("@vscode/ripgrep").rgPath, ["--version"]);`;
step("load the native modules and run rg", staging, "node", ["-e", check]);

rmSync(tmp, { recursive: true, force: true });
writeFileSync(join(staging, INSTALLED_MARKER), `code-server ${CODE_SERVER_VERSION} installed ${new Date().toISOString()}\n`);
mkdirSync(dirname(dir), { recursive: true });
if (existsSync(join(dir, INSTALLED_MARKER))) {
  rmSync(staging, { recursive: true, force: true }); // another run finished first: keep its copy
} else {
  rmSync(dir, { recursive: true, force: true }); // an older attempt without the marker
  renameSync(staging, dir);
}
console.log(`code-server ${CODE_SERVER_VERSION}: installed in ${dir} (${seconds(started)})`);
