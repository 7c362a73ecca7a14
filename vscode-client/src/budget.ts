// Sizing the context for a chat model, and trimming what the server packed when the chat
// model's tokenizer counts more than the server's did. Pure, so the numbers are testable.

/** Below this the context would hold barely one function; better to say so than send it. */
export const MIN_CONTEXT_BUDGET = 256;
/** The server's upper limit for tokenBudget (schemas/protocol/rag.injectContext.json). */
export const MAX_CONTEXT_BUDGET = 1_000_000;

export interface BudgetInput {
  maxInputTokens: number;
  /** Kept free for the conversation to go on (ragLsp.context.reserveTokens). */
  reserveTokens: number;
  promptTokens: number;
  historyTokens: number;
  minimum?: number;
}

export type Budget = { ok: true; tokens: number } | { ok: false; tokens: number; reason: string };

const count = (value: number) => (Number.isFinite(value) && value > 0 ? Math.floor(value) : 0);

/** What is left for context: the model's input limit minus reserve, prompt and history. */
export function contextBudget(input: BudgetInput): Budget {
  const minimum = input.minimum ?? MIN_CONTEXT_BUDGET;
  const left = count(input.maxInputTokens) - count(input.reserveTokens) - count(input.promptTokens) - count(input.historyTokens);
  const tokens = Math.min(Math.max(0, left), MAX_CONTEXT_BUDGET);
  if (tokens >= minimum) return { ok: true, tokens };
  const n = (value: number) => count(value).toLocaleString("en-US");
  return {
    ok: false,
    tokens,
    reason: `The model accepts ${n(input.maxInputTokens)} input tokens; after ${n(input.reserveTokens)} kept for ` +
      `the reply (ragLsp.context.reserveTokens), ${n(input.promptTokens)} for the prompt and ` +
      `${n(input.historyTokens)} for the conversation so far, ${n(tokens)} are left for workspace context ` +
      `(at least ${n(minimum)} are needed). Start a new chat or lower ragLsp.context.reserveTokens.`,
  };
}

/** A budget given directly (no chat model to size it from), within the server's limits. */
export function clampBudget(tokens: number): number {
  return Math.min(Math.max(1, count(tokens)), MAX_CONTEXT_BUDGET);
}

const FENCE = /^(`{3,}|~{3,})/;

/**
 * The context split into one section per item, in order. Sections start at the server's
 * "### <source>: " headings; lines inside fenced code (a Markdown file's own "### ") and
 * unknown sources (a note's own heading) do not start one. Text before the first heading
 * stays with the first section.
 */
export function splitContextSections(context: string, sources: readonly string[] = ["manual", "knowledge", "codebase"]): string[] {
  const heading = new RegExp(`^### (?:${sources.join("|")}): `);
  const sections: string[][] = [[]];
  let fence: string | undefined;
  let sectionHasHeading = false;
  for (const line of context.split("\n")) {
    if (fence) {
      if (line.trimEnd() === fence) fence = undefined;
    } else if (FENCE.test(line)) {
      fence = FENCE.exec(line)![1];
    } else if (heading.test(line)) {
      if (sectionHasHeading) sections.push([]);
      sectionHasHeading = true;
    }
    sections[sections.length - 1].push(line);
  }
  return sections.map((lines) => lines.join("\n").trim()).filter((text) => text !== "");
}

export interface FittedContext {
  context: string;
  /** How many leading sections (items) were kept. */
  kept: number;
  tokens: number;
}

/** Drop sections from the end, recounting, until the rest fits the budget. */
export async function fitToBudget(sections: readonly string[], budget: number, countTokens: (text: string) => Thenable<number> | Promise<number>): Promise<FittedContext> {
  for (let kept = sections.length; kept > 0; kept--) {
    const context = sections.slice(0, kept).join("\n\n");
    const tokens = await countTokens(context);
    if (tokens <= budget) return { context, kept, tokens };
  }
  return { context: "", kept: 0, tokens: 0 };
}
