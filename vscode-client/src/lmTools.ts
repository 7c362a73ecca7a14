// Language model tools for VS Code's agent mode, which never calls chat participants (the @rag
// participant serves ask mode). Two tools, both answered by the RUNNING language server:
//
//   rag-lsp_searchCode  (#ragSearch)   rag/search         = `search_code` of `rag-lsp mcp`
//   rag-lsp_getContext  (#ragContext)  rag/injectContext  = `get_context` of `rag-lsp mcp`
//
// Names, descriptions and input schemas are those of ../schemas/agent-tools.json (package.json's
// contributes.languageModelTools copies them; a test checks), and the answers read as the MCP
// server's do (src/agentAnswers.ts).
//
// No confirmationMessages, on purpose (the issue asked for "confirmation messages"): both tools
// only read the local index. The API reserves a confirmation for "any tool that has a
// side-effect or may potentially be dangerous" (PreparedToolInvocation.confirmationMessages),
// and returning them is what makes VS Code stop and ask. Some VS Code releases confirm every
// extension tool called in a chat anyway, with a generic "Run …?" built from displayName and
// userDescription and an "Always allow" choice; newer ones ask only when a tool returns
// confirmationMessages, so giving them here would make users approve each search of their own
// workspace for nothing.
import * as vscode from "vscode";
import { buildingNote, contextAnswer, searchAnswer } from "./agentAnswers";
import { errorText } from "./commands";
import { Requests, type ContextResponse, type InjectContextParams, type SearchResponse, type SearchResult } from "./protocol";
import { folderName } from "./results";
import type { RagServerApi } from "./serverApi";
import { agentTool, schemaProblems, withDefaults, type AgentTool } from "./toolSchema";

export const SEARCH_TOOL = "rag-lsp_searchCode";
export const CONTEXT_TOOL = "rag-lsp_getContext";

/** Input of rag-lsp_searchCode: search_code's inputSchema. */
export interface SearchInput {
  query: string;
  top_k?: number;
  paths?: string[];
  languages?: string[];
  kinds?: string[];
  max_tokens?: number;
  snippet_lines?: number;
}

/** Input of rag-lsp_getContext: get_context's inputSchema. */
export interface ContextInput {
  query: string;
  mode?: string;
  token_budget?: number;
  include_knowledge?: boolean;
}

/** rag/search params (schemas/protocol/rag.search.json). */
export interface SearchParams {
  query: string;
  topK?: number;
  filters?: { paths?: string[]; languages?: string[]; kinds?: string[] };
}

/** search_code's arguments (defaults filled in) as rag/search params; empty filters are left out. */
export function searchParams(input: SearchInput): SearchParams {
  const params: SearchParams = { query: input.query };
  if (input.top_k !== undefined) params.topK = input.top_k;
  const filters: NonNullable<SearchParams["filters"]> = {};
  if (input.paths?.length) filters.paths = input.paths;
  if (input.languages?.length) filters.languages = input.languages;
  if (input.kinds?.length) filters.kinds = input.kinds;
  if (Object.keys(filters).length) params.filters = filters;
  return params;
}

/** get_context's arguments (defaults filled in) as rag/injectContext params. */
export function contextParams(input: Required<ContextInput>): InjectContextParams {
  return { mode: input.mode, query: input.query, tokenBudget: input.token_budget, includeKnowledge: input.include_knowledge };
}

/** The input with the schema's defaults, or an error naming each bad argument and its rule. */
function checkedInput<T extends object>(toolName: string, tool: AgentTool, input: unknown): T {
  const problems = schemaProblems(tool.inputSchema, input ?? {});
  if (problems.length) throw new Error(`invalid arguments for ${toolName}: ${problems.join("; ")}`);
  return withDefaults(tool.inputSchema, (input ?? {}) as T);
}

export function notRunningMessage(toolName: string): string {
  return `The rag-lsp language server is not running, so ${toolName} cannot answer. Ask the user to run ` +
    "the command 'rag-lsp: Restart server' (and 'rag-lsp: Show log' to see why it stopped); meanwhile use " +
    "other tools to read the workspace.";
}

/** A server request whose failure becomes an error the model can act on. */
async function ask<R>(server: RagServerApi, toolName: string, method: string, params: unknown,
  token: vscode.CancellationToken): Promise<R> {
  const stopped = () => server.state === "stopped"; // read afresh: a request can outlive the process
  if (stopped()) throw new Error(notRunningMessage(toolName));
  try {
    return await server.request<R>(method, params, token);
  } catch (err) {
    if (token.isCancellationRequested) throw new vscode.CancellationError();
    if (stopped()) throw new Error(notRunningMessage(toolName));
    throw new Error(`${toolName} failed: ${errorText(err)}`);
  }
}

function textResult(text: string): vscode.LanguageModelToolResult {
  return new vscode.LanguageModelToolResult([new vscode.LanguageModelTextPart(text)]);
}

/** A query as shown in the chat's progress line. */
function shortQuery(query: unknown): string {
  const text = typeof query === "string" ? query.replace(/\s+/g, " ").trim() : "";
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

/** In a multi-root workspace a path is only clear with its folder: "folder/path". */
function resultPath(result: SearchResult): string {
  return (vscode.workspace.workspaceFolders?.length ?? 0) > 1 ? `${folderName(result.folder)}/${result.path}` : result.path;
}

export function createSearchTool(server: RagServerApi): vscode.LanguageModelTool<SearchInput> {
  const tool = agentTool("search_code");
  return {
    prepareInvocation: ({ input }) => ({ invocationMessage: `Searching the workspace for "${shortQuery(input?.query)}"` }),
    async invoke({ input }, token) {
      const args = checkedInput<Required<SearchInput>>(SEARCH_TOOL, tool, input);
      const response = await ask<SearchResponse>(server, SEARCH_TOOL, Requests.search, searchParams(args), token);
      const notes = response.partial ? [buildingNote(server.status?.percentage)] : [];
      return textResult(searchAnswer(response, {
        query: args.query, maxTokens: args.max_tokens, snippetLines: args.snippet_lines, notes, pathOf: resultPath,
      }));
    },
  };
}

export function createContextTool(server: RagServerApi): vscode.LanguageModelTool<ContextInput> {
  const tool = agentTool("get_context");
  const defaultMode = String(tool.inputSchema.properties?.mode?.default);
  return {
    prepareInvocation: ({ input }) => ({
      invocationMessage: `Gathering ${typeof input?.mode === "string" ? input.mode : defaultMode} context for "${shortQuery(input?.query)}"`,
    }),
    async invoke({ input }, token) {
      const args = checkedInput<Required<ContextInput>>(CONTEXT_TOOL, tool, input);
      const response = await ask<ContextResponse>(server, CONTEXT_TOOL, Requests.injectContext, contextParams(args), token);
      // rag/injectContext has no "partial" flag; the last rag/indexStatus says whether indexing runs.
      const notes = server.status?.state === "indexing" ? [buildingNote(server.status.percentage)] : [];
      return textResult(contextAnswer(response, { query: args.query, mode: args.mode, notes }));
    },
  };
}

/** Registers both tools; a no-op in editors without the language model tools API. */
export function registerLanguageModelTools(server: RagServerApi): vscode.Disposable {
  if (typeof vscode.lm?.registerTool !== "function") return new vscode.Disposable(() => {});
  return vscode.Disposable.from(
    vscode.lm.registerTool(SEARCH_TOOL, createSearchTool(server)),
    vscode.lm.registerTool(CONTEXT_TOOL, createContextTool(server)),
  );
}
