import { beforeEach, describe, expect, it } from "vitest";
import { CloseAction, ErrorAction, ResponseError, RevealOutputChannelOn } from "vscode-languageclient/node";
import { clientOptions, ReportingErrorHandler } from "../../src/clientOptions";
import { fake, window } from "./vscode-stub";

beforeEach(() => fake.reset());

describe("error handler", () => {
  it("never restarts by itself, and reports the close", () => {
    let closed = 0;
    const handler = new ReportingErrorHandler(() => closed++);
    expect(handler.closed()).toEqual({ action: CloseAction.DoNotRestart, handled: true });
    expect(closed).toBe(1);
  });

  it("survives a few garbled messages, not a stream of them", () => {
    const handler = new ReportingErrorHandler(() => {});
    expect(handler.error(new Error("x"), undefined, 3).action).toBe(ErrorAction.Continue);
    expect(handler.error(new Error("x"), undefined, 4).action).toBe(ErrorAction.Shutdown);
  });
});

describe("client options", () => {
  const sent: unknown[] = [];
  const fakeClient = { isRunning: () => true, sendNotification: async (_type: unknown, params: unknown) => { sent.push(params); } };
  const options = () => clientOptions({
    client: () => fakeClient as never,
    storagePath: () => "/storage/ws",
    outputChannel: window.createOutputChannel("rag-lsp") as never,
    errorHandler: new ReportingErrorHandler(() => {}),
  });

  it("syncs the ragLsp section and sends settings at start, with the index in storage", () => {
    fake.state.settings["ragLsp.topK"] = 4;
    const built = options();
    expect(built.synchronize).toEqual({ configurationSection: "ragLsp" });
    expect((built.initializationOptions as () => unknown)()).toEqual({ topK: 4, indexPath: "/storage/ws" });
    expect(built.revealOutputChannelOn).toBe(RevealOutputChannelOn.Never);
  });

  it("answers the server's ragLsp pull with only what the user set", async () => {
    Object.assign(fake.state.settings, { "ragLsp.exclude": ["dist/"], "ragLsp.server.command": ["x"] });
    fake.state.defaults["ragLsp.topK"] = 10;
    const configuration = options().middleware!.workspace!.configuration!;
    const next = async () => [{ topK: 10, exclude: ["dist/"], server: { command: ["x"] } }, { other: true }];
    const answers = await configuration({ items: [{ section: "ragLsp" }, { section: "editor" }] }, {} as never, next as never);
    expect(answers).toEqual([{ exclude: ["dist/"] }, { other: true }]);
  });

  it("passes errors from the default answer through", async () => {
    const error = new ResponseError(1, "no");
    const configuration = options().middleware!.workspace!.configuration!;
    expect(await configuration({ items: [{ section: "ragLsp" }] }, {} as never, (async () => error) as never)).toBe(error);
  });

  it("pushes only what the user set when settings change", async () => {
    sent.length = 0;
    fake.state.settings["ragLsp.searchMode"] = "lexical";
    fake.state.defaults["ragLsp.topK"] = 10;
    await options().middleware!.workspace!.didChangeConfiguration!(["ragLsp"], async () => {});
    expect(sent).toEqual([{ settings: { ragLsp: { searchMode: "lexical" } } }]);
  });
});
