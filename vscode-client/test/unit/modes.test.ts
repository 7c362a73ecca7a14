import { describe, expect, it } from "vitest";
import { availableModes, composePrompt, modeDescription, modeInstructions } from "../../src/modes";

describe("mode list", () => {
  it("is the four built-in modes without extraModes", () => {
    expect(availableModes([])).toEqual(["debugger", "security", "performance", "planning"]);
    expect(availableModes(undefined)).toEqual(["debugger", "security", "performance", "planning"]);
  });

  it("adds extraModes in order, without repeats or invalid names", () => {
    expect(availableModes(["review", "security", "Bad Name", 3, "review", "ops-2"]))
      .toEqual(["debugger", "security", "performance", "planning", "review", "ops-2"]);
  });

  it("describes extra modes too", () => {
    expect(modeDescription("review")).toContain("Extra mode");
    expect(modeDescription("debugger")).toContain("error handling");
  });
});

describe("prompt", () => {
  it("puts the instructions, then the context, then the request", () => {
    const prompt = composePrompt("security", "### codebase: x", "is login safe?");
    expect(prompt.indexOf(modeInstructions("security"))).toBe(0);
    expect(prompt.indexOf("### codebase: x")).toBeLessThan(prompt.indexOf("is login safe?"));
  });

  it("leaves the context heading out when there is no context", () => {
    expect(composePrompt("planning", "", "next steps")).not.toContain("Workspace context");
  });
});
