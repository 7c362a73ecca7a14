// Assistant modes: the four built in to the server plus the user's extraModes, and what each
// asks of the chat model.
import { MODES } from "./protocol";

/** The same rule as extraModes' items in schemas/config.schema.json. */
const MODE_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

export const DEFAULT_MODE = "planning";

/** The chat participant, as declared in package.json (contributes.chatParticipants). */
export const PARTICIPANT_ID = "ragLsp.assistant";
export const PARTICIPANT_NAME = "rag";

/** Built-in modes first, then valid extra modes in the user's order, without repeats. */
export function availableModes(extraModes: unknown): string[] {
  const extra = Array.isArray(extraModes) ? extraModes : [];
  const modes: string[] = [...MODES];
  for (const mode of extra) {
    if (typeof mode === "string" && MODE_NAME.test(mode) && !modes.includes(mode)) modes.push(mode);
  }
  return modes;
}

const FOCUS: Record<string, string> = {
  debugger: "Find the cause of the problem: follow the code and its error handling, name the file and lines at fault, and propose a fix.",
  security: "Review for security issues (untrusted input, authentication, secrets, injection, path handling); rank findings by severity.",
  performance: "Look for performance problems (hot loops, I/O, allocation, caching, batching, concurrency) and estimate their impact.",
  planning: "Help plan the work: build on the documentation and code shown and propose concrete steps that name the files to change.",
};

export function modeDescription(mode: string): string {
  return FOCUS[mode] ?? `Extra mode "${mode}": its own knowledge base, no mode-specific ranking.`;
}

/** The instruction put before the retrieved context in the chat request. */
export function modeInstructions(mode: string): string {
  const focus = FOCUS[mode] ?? `Work in the user's "${mode}" mode.`;
  return `You are a coding assistant working in the user's workspace, in ${mode} mode. ${focus} ` +
    "The workspace context below was retrieved locally by rag-lsp; cite path:lines when you use it, " +
    "and say so when it does not answer the question.";
}

export function composePrompt(mode: string, context: string, prompt: string): string {
  const parts = [modeInstructions(mode)];
  if (context) parts.push(`## Workspace context\n\n${context}`);
  parts.push(`## Request\n\n${prompt}`);
  return parts.join("\n\n");
}
