// When the server dies, start it again, but not forever: a server that keeps crashing (a
// broken install, a bad model file) would otherwise flash errors at the user in a loop.

export interface RestartPolicy {
  /** Restarts allowed within the window; one more crash in it stops the server. */
  maxRestarts: number;
  windowMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = { maxRestarts: 4, windowMs: 3 * 60 * 1000 };

export interface RestartDecision {
  restart: boolean;
  /** Crash times to remember for the next decision (only those still inside the window). */
  crashes: number[];
}

/** Decide on a crash at `now`, given the times of earlier crashes. */
export function decideOnCrash(crashes: readonly number[], now: number, policy = DEFAULT_RESTART_POLICY): RestartDecision {
  const recent = crashes.filter((time) => now - time < policy.windowMs);
  return { restart: recent.length < policy.maxRestarts, crashes: [...recent, now] };
}

export function gaveUpMessage(policy = DEFAULT_RESTART_POLICY): string {
  const minutes = Math.round(policy.windowMs / 60000);
  return `rag-lsp: the server stopped ${policy.maxRestarts + 1} times in ${minutes} minutes and will not be ` +
    "restarted. The log says why; fix it, then run 'rag-lsp: Restart server'.";
}
