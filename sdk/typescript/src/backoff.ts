// When to try again after a connection is lost: pure functions, so the policy is tested
// without clocks or sockets.

export interface BackoffPolicy {
  /** The first wait, before jitter. */
  initialMs: number;
  /** No wait is longer than this. */
  maxMs: number;
  /**
   * The share of each wait that is random, 0..1. With 0.5 a wait of 8 s becomes
   * 4..8 s: clients that lost the same server spread out, yet none comes back sooner
   * than half the plan.
   */
  jitter: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = Object.freeze({ initialMs: 1000, maxMs: 30_000, jitter: 0.5 });

/**
 * The wait before reconnection attempt `attempt` (0 for the first after a loss):
 * `initialMs * 2^attempt`, capped at `maxMs`, with the jittered share scaled by
 * `random()` (a number in [0, 1)).
 */
export function backoffDelay(attempt: number, policy: BackoffPolicy = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  const exp = Math.min(Math.max(0, Math.floor(attempt)), 30);
  const planned = Math.min(policy.maxMs, policy.initialMs * 2 ** exp);
  const jitter = Math.min(1, Math.max(0, policy.jitter));
  const r = Math.min(1, Math.max(0, random()));
  return Math.round(planned * (1 - jitter) + planned * jitter * r);
}

/**
 * The attempt counter after a connection ended: back to 0 if it reached `ready`
 * (the server was fine), else one more.
 */
export function nextAttempt(attempt: number, reachedReady: boolean): number {
  return reachedReady ? 0 : attempt + 1;
}
