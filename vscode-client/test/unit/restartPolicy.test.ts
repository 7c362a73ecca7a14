import { describe, expect, it } from "vitest";
import { decideOnCrash, DEFAULT_RESTART_POLICY, gaveUpMessage, type RestartDecision } from "../../src/restartPolicy";

const MINUTE = 60_000;

/** Feeds crash times through the policy as the error handler does; returns each decision. */
function crashAt(times: number[]): RestartDecision[] {
  let crashes: number[] = [];
  return times.map((time) => {
    const decision = decideOnCrash(crashes, time);
    crashes = decision.crashes;
    return decision;
  });
}

describe("restart policy", () => {
  it("restarts 4 times within 3 minutes, then stops", () => {
    const decisions = crashAt([0, 10_000, 20_000, 30_000, 40_000]);
    expect(decisions.map((d) => d.restart)).toEqual([true, true, true, true, false]);
  });

  it("forgets crashes older than the window", () => {
    const decisions = crashAt([0, 1 * MINUTE, 2 * MINUTE, 2.5 * MINUTE, 3.2 * MINUTE, 4 * MINUTE]);
    expect(decisions.map((d) => d.restart)).toEqual([true, true, true, true, true, true]);
    expect(decisions[5].crashes).toEqual([2 * MINUTE, 2.5 * MINUTE, 3.2 * MINUTE, 4 * MINUTE]);
  });

  it("keeps restarting a server that crashes once an hour", () => {
    const decisions = crashAt(Array.from({ length: 10 }, (_, i) => i * 60 * MINUTE));
    expect(decisions.every((d) => d.restart)).toBe(true);
  });

  it("honours a custom policy", () => {
    const policy = { maxRestarts: 1, windowMs: 1000 };
    expect(decideOnCrash([], 0, policy).restart).toBe(true);
    expect(decideOnCrash([0], 500, policy).restart).toBe(false);
    expect(decideOnCrash([0], 1000, policy).restart).toBe(true);
  });

  it("tells the user what happened and what to do", () => {
    expect(gaveUpMessage(DEFAULT_RESTART_POLICY)).toMatch(/5 times in 3 minutes.*Restart server/);
  });
});
