// The language client's options: how it talks settings with the server, and an error handler
// that leaves restarting to RagServer (which counts crashes across client instances).
import * as vscode from "vscode";
import {
  CloseAction, DidChangeConfigurationNotification, ErrorAction, ResponseError, RevealOutputChannelOn,
  type CloseHandlerResult, type ErrorHandler, type ErrorHandlerResult, type LanguageClient, type LanguageClientOptions,
} from "vscode-languageclient/node";
import { explicitServerSettings, initializationOptions, SECTION } from "./settings";

/** Hands every closed connection to `onClosed`; the client itself never restarts, so a server
 * that dies while starting is reported once instead of in a loop of notifications. */
export class ReportingErrorHandler implements ErrorHandler {
  constructor(private readonly onClosed: () => void) {}

  error(_error: Error, _message: unknown, count: number | undefined): ErrorHandlerResult {
    // A few garbled messages can be survived; a stream of them means the pipe is broken.
    return { action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown };
  }

  closed(): CloseHandlerResult {
    this.onClosed();
    return { action: CloseAction.DoNotRestart, handled: true };
  }
}

export function clientOptions(options: {
  client: () => LanguageClient | undefined;
  storagePath: () => string | undefined;
  outputChannel: vscode.OutputChannel;
  errorHandler: ErrorHandler;
}): LanguageClientOptions {
  const settings = () => explicitServerSettings(vscode.workspace.getConfiguration(SECTION));
  return {
    documentSelector: [{ scheme: "file" }],
    synchronize: { configurationSection: SECTION },
    // A function, so each start sends the settings of that moment.
    initializationOptions: () => initializationOptions(vscode.workspace.getConfiguration(SECTION), options.storagePath()),
    outputChannel: options.outputChannel,
    // Our own messages say what to fix and offer the log; the client's would repeat them.
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationFailedHandler: () => false,
    errorHandler: options.errorHandler,
    middleware: {
      workspace: {
        // The pulled and the pushed ragLsp section hold only what the user set (see settings.ts).
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          if (answers instanceof ResponseError) return answers;
          return params.items.map((item, i) => (item.section === SECTION ? settings() : answers[i]));
        },
        didChangeConfiguration: async () => {
          const client = options.client();
          if (!client?.isRunning()) return; // a starting client sends its settings in initialize
          await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings() } });
        },
      },
    },
  };
}
