// The @rag chat participant: sizes the context from the chat model's input limit, asks the
// server to pack it, trims it with the model's own tokenizer, shows each source as a
// reference, and streams the model's answer.
import * as vscode from "vscode";
import { contextBudget, fitToBudget, splitContextSections } from "./budget";
import { activeFileParam, isFileUri, isWorkspaceFile, itemLocation, toLspRange } from "./lspRange";
import { composePrompt, PARTICIPANT_ID } from "./modes";
import { MAX_QUERY_CHARS, Requests, type ContextItem, type ContextResponse, type InjectContextParams } from "./protocol";
import type { RagServerApi } from "./serverApi";
import { contextSettings, SECTION } from "./settings";
import { errorText } from "./commands";

export interface ChatDeps {
  server: RagServerApi;
  /** The mode when the request has no slash command (the one last activated). */
  defaultMode(): string;
}

/** Earlier turns with this participant, as messages for the model. */
function historyMessages(history: vscode.ChatContext["history"]): vscode.LanguageModelChatMessage[] {
  const messages: vscode.LanguageModelChatMessage[] = [];
  for (const turn of history) {
    if (turn instanceof vscode.ChatRequestTurn) {
      messages.push(vscode.LanguageModelChatMessage.User(turn.prompt));
    } else if (turn instanceof vscode.ChatResponseTurn) {
      const text = turn.response
        .map((part) => (part instanceof vscode.ChatResponseMarkdownPart ? part.value.value : ""))
        .join("");
      if (text) messages.push(vscode.LanguageModelChatMessage.Assistant(text));
    }
  }
  return messages;
}

/** Files and ranges the user attached (#file), as the server's manual context. */
function manualContext(references: readonly vscode.ChatPromptReference[]): InjectContextParams["manualContext"] {
  const manual: NonNullable<InjectContextParams["manualContext"]> = [];
  for (const { value } of references) {
    if (value instanceof vscode.Uri && isFileUri(value)) manual.push(value.toString());
    if (value instanceof vscode.Location && isFileUri(value.uri)) manual.push({ uri: value.uri.toString(), range: toLspRange(value.range) });
  }
  return manual.length ? manual : undefined;
}

async function gatherContext(deps: ChatDeps, request: vscode.ChatRequest, mode: string, tokenBudget: number,
  token: vscode.CancellationToken): Promise<{ context: string; items: ContextItem[] }> {
  const params: InjectContextParams = { mode, tokenBudget };
  // A pasted log can be longer than the server accepts; the model reads ~256 tokens anyway.
  if (request.prompt.trim()) params.query = request.prompt.slice(0, MAX_QUERY_CHARS);
  const activeFile = activeFileParam(vscode.window.activeTextEditor);
  if (activeFile) params.activeFile = activeFile;
  const manual = manualContext(request.references);
  if (manual) params.manualContext = manual;
  const packed = await deps.server.request<ContextResponse>(Requests.injectContext, params, token);
  // The server counted with its own tokenizer (keeping 10% spare); the chat model's decides.
  const sections = splitContextSections(packed.context);
  const fitted = await fitToBudget(sections, tokenBudget, (text) => request.model.countTokens(text, token));
  return { context: fitted.context, items: packed.items.slice(0, fitted.kept) };
}

export function createChatHandler(deps: ChatDeps): vscode.ChatRequestHandler {
  return async (request, chatContext, stream, token) => {
    const mode = request.command ?? deps.defaultMode();
    const model = request.model;
    const history = historyMessages(chatContext.history);
    let historyTokens = 0;
    for (const message of history) historyTokens += await model.countTokens(message, token);
    const budget = contextBudget({
      maxInputTokens: model.maxInputTokens,
      reserveTokens: contextSettings(vscode.workspace.getConfiguration(SECTION)).reserveTokens,
      promptTokens: await model.countTokens(composePrompt(mode, "", request.prompt), token),
      historyTokens,
    });
    if (!budget.ok) {
      stream.markdown(budget.reason);
      return { metadata: { mode } };
    }

    stream.progress(`Gathering ${mode} context from the workspace…`);
    let gathered: { context: string; items: ContextItem[] } = { context: "", items: [] };
    try {
      gathered = await gatherContext(deps, request, mode, budget.tokens, token);
    } catch (err) {
      if (token.isCancellationRequested) return { metadata: { mode } };
      stream.markdown(`_rag-lsp could not gather workspace context (${errorText(err)}); answering without it._\n\n`);
    }
    for (const item of gathered.items) {
      if (item.uri && isWorkspaceFile(item.uri)) stream.reference(itemLocation(item.uri, item.range));
    }

    const messages = [...history, vscode.LanguageModelChatMessage.User(composePrompt(mode, gathered.context, request.prompt))];
    try {
      const response = await model.sendRequest(messages, {}, token);
      for await (const fragment of response.text) stream.markdown(fragment);
    } catch (err) {
      if (token.isCancellationRequested) return { metadata: { mode } };
      return { errorDetails: { message: `The chat model did not answer: ${errorText(err)}` }, metadata: { mode } };
    }
    return { metadata: { mode, items: gathered.items.length } };
  };
}

export function registerChatParticipant(context: vscode.ExtensionContext, deps: ChatDeps): vscode.Disposable {
  // Older or restricted editors have no chat API; the commands still work without it.
  if (typeof vscode.chat?.createChatParticipant !== "function") return new vscode.Disposable(() => {});
  const participant = vscode.chat.createChatParticipant(PARTICIPANT_ID, createChatHandler(deps));
  participant.iconPath = vscode.Uri.joinPath(context.extensionUri, "media", "icon.svg");
  return participant;
}
