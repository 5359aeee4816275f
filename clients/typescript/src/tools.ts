/**
 * Running an agent's client tools: the calls the application answers (`client_tools:` in the
 * agent file).
 *
 * When the model calls a client tool, the thread's stream shows a `client_tool_call` event; the
 * application runs the tool and posts the result (`POST /threads/{id}/tool_results/{call}`). A
 * stream opened without a position first re-sends every call still waiting, so a runner that
 * starts (or starts again, after a crash) finds the calls it still owes. `ToolRunner` does that
 * for the handlers it is given, on one thread and, when asked, on every thread below it.
 */
import { InfinityError } from "./errors.js";
import type { EventStream, StreamOptions } from "./events.js";
import { FIRST_WAIT_MS, GaveUp, MOST_WAIT_MS, RUNNER_BUDGET_MS, retrying } from "./retry.js";
import type { Accepted, ClientToolCall, ThreadRecord } from "./types.js";

/**
 * A client tool's handler: called with the call's arguments (checked against the tool's
 * `input_schema`) and the call itself (`call_id`, `thread_id`, `deadline`, ...), it returns the
 * result: a string is sent as it is, any other value as JSON; a promise is awaited. What it
 * throws is sent as an error result (`is_error`) naming the error.
 */
// `any`: the tool's own schema says what `args` is, which the document cannot.
export type ToolHandler = (args: any, call: ClientToolCall) => unknown;

/** How `runTools` runs. */
export interface RunToolsOptions {
  /** Stops the runner: `runTools` then resolves with what it posted. */
  signal?: AbortSignal;
  /**
   * Also answer the calls of the threads spawned below (default `true`): those open when it
   * starts, and new ones as `thread_spawned` shows them.
   */
  followChildren?: boolean;
}

/** A result the runner posted (or tried to), as `runTools` resolves them. */
export interface ToolAnswer {
  threadId: string;
  callId: string;
  /** The tool. */
  name: string;
  /** The result as sent: the handler's string, its value as JSON, or the error's text. */
  text: string;
  /** True when the handler threw. */
  isError: boolean;
  /**
   * False when the server answered 409: the call no longer waited for this answer. It had its
   * result already (from another runner, or from this one when the answer to an earlier
   * attempt was lost on the way back), was past its deadline, or was cancelled; the runtime
   * kept the first answer.
   */
  accepted: boolean;
}

/** What the runner needs of the client. */
export interface ToolClient {
  streamEvents(threadId: string, options?: StreamOptions): EventStream;
  getThread(threadId: string, options?: { signal?: AbortSignal }): Promise<ThreadRecord>;
  postToolResult(threadId: string, callId: string, text: string, options?: { isError?: boolean; signal?: AbortSignal }): Promise<Accepted>;
}

/** What a handler's value is sent as: a string as it is, anything else as JSON (`undefined`: `null`). */
export function resultText(value: unknown): string {
  if (typeof value === "string") return value;
  return JSON.stringify(value) ?? "null";
}

/** What a handler's error is sent as (an error result): its name and message. */
export function errorText(error: unknown): string {
  if (error instanceof Error) return error.message === "" ? error.name : `${error.name}: ${error.message}`;
  return String(error);
}

/**
 * How long results being posted may go on after the run ends (a stop, the thread closing, an
 * error), in milliseconds: a result a handler gave is not dropped for a stop that came while
 * it was posted.
 */
const POST_GRACE_MS = 10_000;

/**
 * Follows a thread (and, with `followChildren`, the threads below it) and answers the calls of
 * the tools it has handlers for, each once. Made by `InfinityClient.runTools`.
 *
 * Every request it makes (each stream's connections, the thread lookups, the results) is tried
 * again as `Backoff` says, for up to `RUNNER_BUDGET_MS`; the first error it cannot go past ends
 * the run, and `run` rejects with it.
 */
export class ToolRunner {
  readonly #client: ToolClient;
  readonly #root: string;
  readonly #handlers: Map<string, ToolHandler>;
  readonly #followChildren: boolean;
  readonly #controller = new AbortController();
  readonly #followed = new Set<string>();
  /** The calls whose handler ran: the snapshot and the numbered event may both show one. */
  readonly #started = new Set<string>();
  readonly #followers: Promise<void>[] = [];
  /** Results being posted: a stop waits for them, so that a result a handler gave is not lost. */
  readonly #posting = new Set<Promise<unknown>>();
  /** Aborted `POST_GRACE_MS` after the run ends: the results still being posted are given up. */
  readonly #grace = new AbortController();
  readonly #answers: ToolAnswer[] = [];
  #failure: { error: unknown } | undefined;

  constructor(client: ToolClient, threadId: string, handlers: Record<string, ToolHandler>, followChildren = true) {
    this.#client = client;
    this.#root = threadId;
    this.#handlers = new Map(Object.entries(handlers));
    this.#followChildren = followChildren;
  }

  /** Runs until `signal` aborts or the thread closes; rejects with an error it cannot go past. */
  async run(signal?: AbortSignal): Promise<ToolAnswer[]> {
    if (signal?.aborted) return [];
    const stop = (): void => this.#controller.abort();
    signal?.addEventListener("abort", stop, { once: true });
    try {
      this.#follow(this.#root);
      await new Promise<void>((resolve) => this.#controller.signal.addEventListener("abort", () => resolve(), { once: true }));
      // Each stream ends as the signal aborts. Handlers still running are left (what they
      // return is not posted); results on their way to the server go on for a while.
      const grace = setTimeout(() => this.#grace.abort(), POST_GRACE_MS);
      try {
        await Promise.allSettled([...this.#followers, ...this.#posting]);
      } finally {
        clearTimeout(grace);
      }
    } finally {
      signal?.removeEventListener("abort", stop);
    }
    if (this.#failure !== undefined) throw this.#failure.error;
    return [...this.#answers];
  }

  /** Ends the run with `error` (the first one wins), which `run` rejects with. */
  #fail(error: unknown): void {
    if (error instanceof GaveUp) return; // a request the run's end cut short
    this.#failure ??= { error };
    this.#controller.abort();
  }

  #follow(threadId: string): void {
    if (this.#followed.has(threadId) || this.#controller.signal.aborted) return;
    this.#followed.add(threadId);
    this.#followers.push(this.#followThread(threadId).catch((error: unknown) => this.#fail(error)));
  }

  async #followThread(threadId: string): Promise<void> {
    const signal = this.#controller.signal;
    // Each round opens the stream without a position, so that the server first re-sends the
    // calls still waiting. The stream resumes by itself after a dropped connection; only a
    // `reset` (events lost) makes it start again from the snapshot.
    while (!signal.aborted) {
      let reset = false;
      const stream = this.#client.streamEvents(threadId, {
        signal,
        retryMs: FIRST_WAIT_MS,
        maxRetryMs: MOST_WAIT_MS,
        retryForMs: RUNNER_BUDGET_MS,
      });
      for await (const event of stream) {
        if (event.type === "client_tool_call") {
          this.#take(threadId, event);
        } else if (event.type === "attached") {
          if (await this.#closedOrFollowChildren(threadId)) return this.#ended(threadId);
        } else if (event.type === "thread_spawned") {
          if (this.#followChildren) this.#follow(event.child_id);
        } else if (event.type === "thread_closed") {
          return this.#ended(threadId);
        } else if (event.type === "reset") {
          reset = true;
          break;
        }
      }
      if (!reset) return; // aborted
    }
  }

  /** The thread is closed: the run ends with the root; a child's stream just stops. */
  #ended(threadId: string): void {
    if (threadId === this.#root) this.#controller.abort();
  }

  /**
   * Once attached: true if the thread is closed already; otherwise, with `followChildren`,
   * follows its open children (spawned before the stream attached; later ones come as
   * `thread_spawned`). The parent's record lists a child as soon as the spawn is committed,
   * before the child's own record exists.
   */
  async #closedOrFollowChildren(threadId: string): Promise<boolean> {
    let record: ThreadRecord;
    try {
      record = await retrying((signal) => this.#client.getThread(threadId, { signal }), { signal: this.#controller.signal });
    } catch (error) {
      if (error instanceof InfinityError && error.status === 404) return false; // not created yet
      throw error;
    }
    if (record.status === "closed") return true;
    if (this.#followChildren) {
      for (const child of record.children ?? []) if (child.closed !== true) this.#follow(child.thread_id);
    }
    return false;
  }

  #take(threadId: string, call: ClientToolCall): void {
    const handler = this.#handlers.get(call.name);
    if (handler === undefined || this.#started.has(call.call_id)) return; // not ours, or running
    this.#started.add(call.call_id);
    this.#answer(threadId, call, handler).catch((error: unknown) => this.#fail(error));
  }

  async #answer(threadId: string, call: ClientToolCall, handler: ToolHandler): Promise<void> {
    let text: string;
    let isError = false;
    try {
      text = resultText(await handler(call.args, call));
    } catch (error) {
      text = errorText(error);
      isError = true;
    }
    if (this.#controller.signal.aborted) return;
    const posting = this.#post(threadId, call.call_id, text, isError);
    this.#posting.add(posting);
    try {
      const accepted = await posting;
      if (accepted !== undefined) this.#answers.push({ threadId, callId: call.call_id, name: call.name, text, isError, accepted });
    } finally {
      this.#posting.delete(posting);
    }
  }

  /**
   * Posts a result, trying again as `retrying` does: false when the call no longer waits for
   * one (409: answered, by this runner before an answer that got lost, or by another; past its
   * deadline; cancelled); undefined when the run ended and its grace passed first.
   */
  async #post(threadId: string, callId: string, text: string, isError: boolean): Promise<boolean | undefined> {
    try {
      await retrying((signal) => this.#client.postToolResult(threadId, callId, text, { isError, signal }), { signal: this.#grace.signal });
      return true;
    } catch (error) {
      if (error instanceof InfinityError && error.status === 409) return false;
      if (error instanceof GaveUp) return undefined;
      throw error;
    }
  }
}
