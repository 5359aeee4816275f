/**
 * A thread's event stream (`GET /threads/{id}/events`) that resumes by itself.
 *
 * The server numbers a thread's events and sends each number as the SSE `id`. This stream keeps
 * the last id it saw and, whenever the connection ends (it drops, the server restarts, or a host
 * without live events ends it with `reconnect`), connects again with `Last-Event-ID`, so the
 * server sends exactly what was missed: no gap and no event twice.
 */
import { InfinityError } from "./errors.js";
import { readSse } from "./sse.js";
import type { StreamEvent } from "./types.js";
import type { components } from "./schema.js";

/** How to follow a thread's events. */
export interface StreamOptions {
  /**
   * Resume after this event number: the `lastEventId` of `getHistory`, or of an earlier stream.
   * `0` streams the thread from its first event. Without it, the stream attaches: it sends the
   * thread's current views and open questions, then `attached` with the position, then what
   * follows.
   */
  after?: number;
  /** Stops the stream: the iteration then ends without an error. */
  signal?: AbortSignal;
  /**
   * The wait before connecting again after a connection failed or dropped, in milliseconds
   * (default 1000). It doubles with each failure in a row up to `maxRetryMs`, and a `retry:`
   * field from the server replaces it.
   */
  retryMs?: number;
  /** The longest wait between two attempts, in milliseconds (default 30000). */
  maxRetryMs?: number;
}

/** What the stream needs of the client: where the thread's events are, and how to fetch. */
export interface StreamTarget {
  url: string;
  headers: Record<string, string>;
  fetch: typeof globalThis.fetch;
}

/** Statuses worth trying again: the server or a proxy is busy or restarting. */
const TRANSIENT = new Set([408, 429, 502, 503, 504]);

/**
 * A thread's events as an async iterable. Iterating it connects; leaving the loop (`break`,
 * an exception, or the signal) closes the connection. The position is kept, so iterating the
 * same stream again later resumes after the last event the previous loop got. Iterate it from
 * one loop at a time.
 *
 * It throws `InfinityError` when the server refuses the request (e.g. 400 for a malformed
 * thread id, 401 for a missing token); it waits and tries again when the server cannot be
 * reached or answers 408, 429, 502, 503 or 504.
 */
export class EventStream implements AsyncIterable<StreamEvent> {
  readonly #target: StreamTarget;
  readonly #signal: AbortSignal | undefined;
  readonly #retryMs: number;
  readonly #maxRetryMs: number;
  #lastEventId: string | undefined;
  #connections = 0;

  constructor(target: StreamTarget, options: StreamOptions = {}) {
    this.#target = target;
    this.#signal = options.signal;
    this.#retryMs = options.retryMs ?? 1000;
    this.#maxRetryMs = Math.max(options.maxRetryMs ?? 30_000, this.#retryMs);
    this.#lastEventId = options.after === undefined ? undefined : String(options.after);
  }

  /** The number of the last event received (`Last-Event-ID` of the next connection), if any. */
  get lastEventId(): number | undefined {
    return this.#lastEventId === undefined ? undefined : Number(this.#lastEventId);
  }

  /** How many times the stream has connected so far (1 + the reconnections). */
  get connections(): number {
    return this.#connections;
  }

  [Symbol.asyncIterator](): AsyncGenerator<StreamEvent> {
    return this.#follow();
  }

  async *#follow(): AsyncGenerator<StreamEvent> {
    // One controller per loop: aborting it closes the connection however the loop ends.
    const controller = new AbortController();
    const stop = (): void => controller.abort(this.#signal?.reason);
    if (this.#signal?.aborted) return;
    this.#signal?.addEventListener("abort", stop, { once: true });
    let retry = this.#retryMs;
    let wait = retry;
    try {
      while (!controller.signal.aborted) {
        let reconnectAfter: number | undefined;
        try {
          const response = await this.#target.fetch(this.#target.url, {
            headers: this.#requestHeaders(),
            signal: controller.signal,
          });
          if (!response.ok) {
            const error = await InfinityError.fromResponse(response);
            if (!TRANSIENT.has(response.status)) throw error;
          } else if (response.body !== null) {
            this.#connections += 1;
            for await (const message of readSse(response.body)) {
              if (message.id !== undefined) this.#lastEventId = message.id === "" ? undefined : message.id;
              if (message.retry !== undefined) retry = wait = message.retry;
              if (message.data === undefined) continue;
              const data = parse(message.data, message.event);
              if (data.type === "reconnect") {
                reconnectAfter = data.after_ms;
                continue;
              }
              wait = retry; // it works again: the next failure waits the shortest time
              yield data;
            }
          }
        } catch (error) {
          if (controller.signal.aborted) return;
          if (error instanceof InfinityError || error instanceof MalformedEvent) throw error;
          // Anything else is the connection failing or dropping: try again below.
        }
        if (controller.signal.aborted) return;
        if (reconnectAfter !== undefined) {
          await sleep(reconnectAfter, controller.signal);
        } else {
          await sleep(wait, controller.signal);
          wait = Math.min(wait * 2, this.#maxRetryMs);
        }
      }
    } finally {
      this.#signal?.removeEventListener("abort", stop);
      controller.abort();
    }
  }

  #requestHeaders(): Record<string, string> {
    const headers: Record<string, string> = { ...this.#target.headers, Accept: "text/event-stream" };
    if (this.#lastEventId !== undefined) headers["Last-Event-ID"] = this.#lastEventId;
    return headers;
  }
}

/** An event whose `data` is not the JSON the document describes: the server broke the contract. */
export class MalformedEvent extends Error {
  override readonly name = "MalformedEvent";
}

function parse(data: string, event: string): components["schemas"]["StreamData"] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    throw new MalformedEvent(`the \`${event}\` event's data is not JSON: ${data.slice(0, 200)}`);
  }
  if (typeof parsed !== "object" || parsed === null || typeof (parsed as { type?: unknown }).type !== "string") {
    throw new MalformedEvent(`the \`${event}\` event's data has no \`type\`: ${data.slice(0, 200)}`);
  }
  return parsed as components["schemas"]["StreamData"];
}

/** Waits `ms`, or less when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
