import { describe, expect, it } from "vitest";
import { clampBudget, contextBudget, fitToBudget, MAX_CONTEXT_BUDGET, MIN_CONTEXT_BUDGET, splitContextSections } from "../../src/budget";

describe("context budget", () => {
  it("is the input limit minus reserve, prompt and history", () => {
    expect(contextBudget({ maxInputTokens: 128_000, reserveTokens: 2000, promptTokens: 150, historyTokens: 850 }))
      .toEqual({ ok: true, tokens: 125_000 });
  });

  it("is never negative, and says why there is no room", () => {
    const budget = contextBudget({ maxInputTokens: 8192, reserveTokens: 2000, promptTokens: 6000, historyTokens: 500 });
    expect(budget.ok).toBe(false);
    expect(budget.tokens).toBe(0);
    if (!budget.ok) {
      expect(budget.reason).toContain("8,192 input tokens");
      expect(budget.reason).toContain("ragLsp.context.reserveTokens");
    }
  });

  it("refuses a budget below the useful minimum", () => {
    const input = { maxInputTokens: 2000 + 100 + MIN_CONTEXT_BUDGET - 1, reserveTokens: 2000, promptTokens: 100, historyTokens: 0 };
    expect(contextBudget(input)).toMatchObject({ ok: false, tokens: MIN_CONTEXT_BUDGET - 1 });
    expect(contextBudget({ ...input, maxInputTokens: input.maxInputTokens + 1 })).toEqual({ ok: true, tokens: MIN_CONTEXT_BUDGET });
    expect(contextBudget({ ...input, minimum: 10 })).toEqual({ ok: true, tokens: MIN_CONTEXT_BUDGET - 1 });
  });

  it("treats nonsense counts as zero and stays within the server's limit", () => {
    expect(contextBudget({ maxInputTokens: 5000, reserveTokens: -1, promptTokens: NaN, historyTokens: 0.5 })).toEqual({ ok: true, tokens: 5000 });
    expect(contextBudget({ maxInputTokens: 2_000_000, reserveTokens: 0, promptTokens: 0, historyTokens: 0 }).tokens).toBe(MAX_CONTEXT_BUDGET);
    expect(contextBudget({ maxInputTokens: Infinity, reserveTokens: 0, promptTokens: 0, historyTokens: 0 }).ok).toBe(false);
  });

  it("clamps a fixed budget to 1..1,000,000", () => {
    expect(clampBudget(4000)).toBe(4000);
    expect(clampBudget(0)).toBe(1);
    expect(clampBudget(5e6)).toBe(MAX_CONTEXT_BUDGET);
  });
});

const knowledge = "### knowledge: Retry storms (2026-11-22T12:30:05Z, score 0.71)\nJobs retried pile up.\n### Notes\nA note's own heading.";
const code = "### codebase: run (src/jobs/runner.py:L12-L20, score 0.52)\n```python src/jobs/runner.py:L12-L20\ndef run():\n    ...\n```";
const markdown = "### codebase: Design (docs/design.md:L1-L9, score 0.40)\n````markdown docs/design.md:L1-L9\n### codebase: not a heading\n```\ninner\n```\n````";
const context = [knowledge, code, markdown].join("\n\n");

describe("splitting the context into items", () => {
  it("splits on the server's headings only, not inside code or notes", () => {
    expect(splitContextSections(context)).toEqual([knowledge, code, markdown]);
  });

  it("keeps text before the first heading with the first item", () => {
    expect(splitContextSections(`preamble\n\n${code}\n\n${knowledge}`)).toEqual([`preamble\n\n${code}`, knowledge]);
  });

  it("returns nothing for an empty context", () => {
    expect(splitContextSections("")).toEqual([]);
  });
});

describe("fitting the context to the chat model's tokenizer", () => {
  const countWords = async (text: string) => text.split(/\s+/).filter(Boolean).length;

  it("keeps everything that fits", async () => {
    const fitted = await fitToBudget(["a b", "c d"], 10, countWords);
    expect(fitted).toEqual({ context: "a b\n\nc d", kept: 2, tokens: 4 });
  });

  it("drops items from the end and recounts until it fits", async () => {
    const counted: string[] = [];
    const fitted = await fitToBudget(["a b c", "d e", "f g h"], 5, async (text) => { counted.push(text); return countWords(text); });
    expect(fitted).toEqual({ context: "a b c\n\nd e", kept: 2, tokens: 5 });
    expect(counted).toEqual(["a b c\n\nd e\n\nf g h", "a b c\n\nd e"]);
  });

  it("keeps nothing when even the first item is too big", async () => {
    expect(await fitToBudget(["a b c d e f"], 5, countWords)).toEqual({ context: "", kept: 0, tokens: 0 });
    expect(await fitToBudget([], 5, countWords)).toEqual({ context: "", kept: 0, tokens: 0 });
  });
});
