/**
 * A thread's event stream (`GET /threads/{id}/events`) that resumes by itself.
 *
 * The server numbers a thread's events and sends each number as the SSE `id`. This stream keeps
 * the last id it saw and, whenever the connection ends (it drops, the server restarts, or a host
 * without live events ends it with `reconnect`), connects again with `Last-Event-ID`, so the
 * server sends exactly what was missed: no gap and no event twice.
 */
import { InfinityError } from "./errors.js";
import { Backoff, sleep } from "./retry.js";
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
  after?: number | string;
  /** Stops the stream: the iteration then ends without an error. */
  signal?: AbortSignal;
  /**
   * The wait before connecting again after a connection failed or dropped, in milliseconds
   * (default 1000). It doubles with each failure in a row up to `maxRetryMs`, less up to half
   * at random; an answer's `Retry-After` is waited instead; a `retry:` field from the server
   * replaces it.
   */
  retryMs?: number;
  /** The longest wait between two attempts, in milliseconds (default 30000). */
  maxRetryMs?: number;
  /**
   * Give up (throw the last error) once the next attempt would start more than this many
   * milliseconds after the first failure in a row (default: never give up).
   */
  retryForMs?: number;
}

/** What the stream needs of the client: where the thread's events are, and how to fetch. */
export interface StreamTarget {
  url: string;
  headers: Record<string, string>;
  fetch: typeof globalThis.fetch;
}

/**
 * A thread's events as an async iterable. Iterating it connects; leaving the loop (`break`,
 * an exception, or the signal) closes the connection. The position is kept, so iterating the
 * same stream again later resumes after the last event the previous loop got. Iterate it from
 * one loop at a time.
 *
 * It throws `InfinityError` when the server refuses the request (e.g. 400 for a malformed
 * thread id, 401 for a missing token); it waits and tries again when the server cannot be
 * reached or answers 408, 429 or 5xx (see `Backoff`).
 */
export class EventStream implements AsyncIterable<StreamEvent> {
  readonly #target: StreamTarget;
  readonly #signal: AbortSignal | undefined;
  readonly #backoff: Backoff;
  #lastEventId: string | undefined;
  #connections = 0;

  constructor(target: StreamTarget, options: StreamOptions = {}) {
    this.#target = target;
    this.#signal = options.signal;
    this.#backoff = new Backoff({ firstMs: options.retryMs ?? 1000, mostMs: options.maxRetryMs ?? 30_000, budgetMs: options.retryForMs });
    this.#lastEventId = options.after === undefined ? undefined : String(options.after);
  }

  /**
   * The SSE id of the last event received (`Last-Event-ID` of the next connection), if any: a
   * kept event's number, or `"N.B.D"` for an event shown before its slice committed (the server
   * checks, on resume, that the copies the client has are the ones it kept).
   */
  get lastEventId(): number | string | undefined {
    const id = this.#lastEventId;
    if (id === undefined) return undefined;
    return /^[0-9]+$/.test(id) ? Number(id) : id;
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
    const backoff = this.#backoff;
    try {
      while (!controller.signal.aborted) {
        let reconnectAfter: number | undefined;
        let failure: unknown;
        try {
          const response = await this.#target.fetch(this.#target.url, {
            headers: this.#requestHeaders(),
            signal: controller.signal,
          });
          if (!response.ok) {
            failure = await InfinityError.fromResponse(response);
          } else if (response.body !== null) {
            this.#connections += 1;
            backoff.succeeded();
            for await (const message of readSse(response.body)) {
              if (message.id !== undefined) this.#lastEventId = message.id === "" ? undefined : message.id;
              if (message.retry !== undefined) backoff.firstMs = message.retry;
              if (message.data === undefined) continue;
              const data = parse(message.data, message.event);
              if (data.type === "reconnect") {
                reconnectAfter = data.after_ms;
                continue;
              }
              yield data;
            }
          }
        } catch (error) {
          if (controller.signal.aborted) return;
          if (error instanceof MalformedEvent) throw error;
          failure = error; // the connection failed or dropped, most likely: see below
        }
        if (controller.signal.aborted) return;
        // What the server asked for; after a failure, the backoff's wait (which throws a
        // refusal, or a failure past its budget); after a stream that simply ended, the plain
        // retry delay.
        const wait = reconnectAfter ?? (failure === undefined ? backoff.firstMs : backoff.failed(failure));
        await sleep(wait, controller.signal);
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
