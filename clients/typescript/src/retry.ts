/**
 * When a request is worth sending again, and how long to wait first: the client's one policy.
 *
 * A connection that failed or dropped (`fetch`'s `TypeError`), a timeout, 408, 429 and any 5xx
 * say nothing about the request itself: a server restarting, a proxy in between, a busy host.
 * Any other 4xx would get the same answer again, so it is final. Waits double from a short first
 * one up to a cap, each shortened at random by up to half (jitter: many clients that lost the
 * same server do not all come back at the same instant); a `Retry-After` the server sent is
 * waited as it is.
 *
 * `Backoff` counts the failures in a row of one request (or of one event stream's connections)
 * and says how long to wait, or throws the error when the budget is spent. `runTools` gives
 * every request it makes `RUNNER_BUDGET_MS`: about a minute.
 */
import { InfinityError } from "./errors.js";

/** The first wait after a failure, in milliseconds; each failure in a row doubles it... */
export const FIRST_WAIT_MS = 250;
/** ... up to this. */
export const MOST_WAIT_MS = 5000;
/**
 * How long `runTools` tries a request again after its first attempt failed, in milliseconds:
 * no attempt starts later than this after the first.
 */
export const RUNNER_BUDGET_MS = 60_000;

/**
 * True when sending the same request again may succeed: a failed, dropped or timed-out
 * connection, or an answer of 408, 429 or 5xx.
 */
export function retryable(error: unknown): boolean {
  if (error instanceof InfinityError) return error.status === 408 || error.status === 429 || (error.status >= 500 && error.status <= 599);
  // fetch fails with a TypeError when the connection does; a fetch given a timeout signal
  // (AbortSignal.timeout) with a TimeoutError.
  return error instanceof TypeError || (error instanceof Error && error.name === "TimeoutError");
}

/** How a `Backoff` waits and when it gives up. */
export interface BackoffOptions {
  /** The first wait, in milliseconds (default `FIRST_WAIT_MS`). */
  firstMs?: number;
  /** The longest wait (default `MOST_WAIT_MS`). */
  mostMs?: number;
  /**
   * Give up once the next attempt would start more than this many milliseconds after the first
   * failure in a row (default: never).
   */
  budgetMs?: number;
  /** For tests: the clock (default `Date.now`) and the random numbers in [0, 1) (`Math.random`). */
  now?: () => number;
  random?: () => number;
}

/**
 * The waits between the attempts of one request, and when to give up: `failed(error)` gives
 * the wait before the next attempt, or throws `error` when it is final (see `retryable`) or the
 * budget is spent; `succeeded()` starts afresh.
 */
export class Backoff {
  /** The first wait, in milliseconds (an event stream's `retry:` field replaces it). */
  firstMs: number;
  readonly #mostMs: number;
  readonly #budgetMs: number | undefined;
  readonly #now: () => number;
  readonly #random: () => number;
  #failures = 0;
  #since = 0;

  constructor(options: BackoffOptions = {}) {
    this.firstMs = options.firstMs ?? FIRST_WAIT_MS;
    this.#mostMs = Math.max(options.mostMs ?? MOST_WAIT_MS, this.firstMs);
    this.#budgetMs = options.budgetMs;
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
  }

  /** The request went through: the failures so far no longer count. */
  succeeded(): void {
    this.#failures = 0;
  }

  /** The wait before the next attempt after `error`, in milliseconds; throws `error` when none comes. */
  failed(error: unknown): number {
    if (!retryable(error)) throw error;
    const now = this.#now();
    if (this.#failures === 0) this.#since = now;
    this.#failures += 1;
    let wait: number;
    if (error instanceof InfinityError && error.retryAfterMs !== undefined) {
      wait = error.retryAfterMs;
    } else {
      wait = Math.min(this.#mostMs, this.firstMs * 2 ** (this.#failures - 1));
      wait -= (wait * this.#random()) / 2;
    }
    if (this.#budgetMs !== undefined && now + wait - this.#since > this.#budgetMs) throw error;
    return wait;
  }
}

/** Thrown by `retrying` when its signal aborted: the request was given up, not refused. */
export class GaveUp extends Error {
  override readonly name = "GaveUp";
}

/**
 * Calls `send` until it resolves, trying again as a `Backoff` with `budgetMs` says. Aborting
 * `signal` gives up at once (`GaveUp`); `send` gets it, to abandon a request under way.
 */
export async function retrying<T>(send: (signal?: AbortSignal) => Promise<T>, options: { budgetMs?: number; signal?: AbortSignal } = {}): Promise<T> {
  const { signal } = options;
  const backoff = new Backoff({ budgetMs: options.budgetMs ?? RUNNER_BUDGET_MS });
  for (;;) {
    if (signal?.aborted) throw new GaveUp("given up: the run ended");
    let wait: number;
    try {
      return await send(signal);
    } catch (error) {
      if (signal?.aborted) throw new GaveUp("given up: the run ended", { cause: error });
      wait = backoff.failed(error);
    }
    await sleep(wait, signal);
  }
}

/** Waits `ms`, or less when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
