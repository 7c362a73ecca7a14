// Node's own require("vscode") (inside vscode-languageclient) gets the same stub instance the
// `vscode` alias gives to TypeScript imports, so tests can run the real language client. The
// client touches much more of the API than the extension does; what the stub lacks becomes a
// harmless catch-all for it (never for the extension's own code, which gets the plain stub).
import Module from "node:module";
import * as stub from "./vscode-stub";

function anything(): unknown {
  return new Proxy(function () { return anything(); }, {
    get: (_target, key) => (key === "then" ? undefined : key === Symbol.iterator ? function* () {} : key === "dispose" ? () => {} : anything()),
    construct: () => anything() as object,
  });
}

const NAMESPACES = new Set(["window", "workspace", "commands", "env", "languages", "lm", "chat"]);
function forgiving<T extends object>(target: T): T {
  return new Proxy(target, {
    get: (object, key) => {
      if (key in object) {
        const value = (object as Record<string | symbol, unknown>)[key];
        return NAMESPACES.has(String(key)) && value && typeof value === "object" ? forgiving(value) : value;
      }
      return key === "then" || key === "default" || key === "__esModule" ? undefined : anything();
    },
  });
}

const forClient = forgiving({ ...stub, version: "1.100.0", languages: {}, env: { ...stub.env, appName: "Visual Studio Code", language: "en" } });
type Load = (request: string, ...rest: unknown[]) => unknown;
const loader = Module as unknown as { _load: Load };
const load = loader._load;
loader._load = function (request: string, ...rest: unknown[]) {
  return request === "vscode" ? forClient : load.call(this, request, ...rest);
};
