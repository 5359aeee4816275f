/**
 * `InfinityClient`: the routes of Infinity's HTTP API over threads, as methods. Requests are
 * typed by the generated `paths` (see `http.ts`), so a route or a body the document does not
 * have is a compile error; answers that are not a success throw `InfinityError`.
 */
import { EventStream, type StreamOptions } from "./events.js";
import { exchange, request, type Http } from "./http.js";
import type { paths } from "./schema.js";
import { ToolRunner, type RunToolsOptions, type ToolAnswer, type ToolHandler } from "./tools.js";
import type {
  Accepted,
  Agents,
  Choice,
  Chosen,
  HistoryEntry,
  Models,
  NewBudget,
  Schedule,
  ScheduleArgs,
  ScheduleCreated,
  ThreadPage,
  ThreadQuery,
  ThreadRecord,
  ThreadSummary,
  WaitingTree,
  WhileBusy,
} from "./types.js";

/** Where the API is and how to reach it. */
export interface InfinityClientOptions {
  /** The server's address, e.g. `http://127.0.0.1:8700` (`infinity serve`) or a stack's `ApiUrl`. */
  baseUrl: string;
  /**
   * The server's token, sent as `Authorization: Bearer TOKEN`. `infinity serve` on loopback
   * needs none; beyond loopback, or with `INFINITY_SERVE_TOKEN` set, it does.
   */
  token?: string;
  /** The `fetch` to use (default: the global one), e.g. to add a timeout or a proxy. */
  fetch?: typeof globalThis.fetch;
}

/** A thread's history, and the position to stream its events from. */
export interface History {
  /** The entries, oldest first. */
  entries: HistoryEntry[];
  /**
   * The number of the last event the history includes (its `Last-Event-ID` header): pass it as
   * `after` to `streamEvents` to follow the thread from there, missing and repeating nothing.
   */
  lastEventId: number | undefined;
}

/** The optional `{"tree": true}` of `interrupt` and `closeThread`. */
export interface TreeOption {
  /** Act on the thread's open descendants too. */
  tree?: boolean;
}

/** A client of one Infinity server. */
export class InfinityClient {
  readonly #http: Http;

  constructor(options: InfinityClientOptions) {
    this.#http = {
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers: options.token === undefined ? {} : { Authorization: `Bearer ${options.token}` },
      // Looked up at each call, so that a fetch replaced after construction (a test's) is used.
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
    };
  }

  /**
   * Posts a person's message to a thread; the first one creates the thread. `agent` (`NAME` or
   * `NAME@VERSION`) picks the agent of a new conversation. `whileBusy` says what the message does
   * if the thread is busy (a call it made has no result yet) instead of what its agent says:
   * `move_on`, `queue` (answered once the turn ends), `interrupt` or `reject` (a busy thread
   * answers 409). The answer (202) means the message is kept: the reply comes as events.
   */
  async sendMessage(
    threadId: string,
    text: string,
    options: { agent?: string; whileBusy?: WhileBusy } = {},
  ): Promise<Accepted> {
    return request(this.#http, "post", "/threads/{id}/messages", {
      path: { id: threadId },
      body: {
        text,
        ...(options.agent === undefined ? {} : { agent: options.agent }),
        ...(options.whileBusy === undefined ? {} : { while_busy: options.whileBusy }),
      },
    });
  }

  /** One page of threads, newest activity first; pass the page's `next` as `cursor` for the next. */
  async listThreads(query: ThreadQuery = {}): Promise<ThreadPage> {
    return request(this.#http, "get", "/threads", { query });
  }

  /** Every thread the query selects, page after page (`limit` sets the page size). */
  async *allThreads(query: ThreadQuery = {}): AsyncGenerator<ThreadSummary> {
    let cursor = query.cursor;
    do {
      const page = await this.listThreads({ ...query, cursor });
      yield* page.threads;
      cursor = page.next ?? undefined;
    } while (cursor !== undefined);
  }

  /** A thread's whole record. `signal` abandons the request. */
  async getThread(threadId: string, options: { signal?: AbortSignal } = {}): Promise<ThreadRecord> {
    return request(this.#http, "get", "/threads/{id}", { path: { id: threadId } }, options.signal);
  }

  /** The records of the thread and every thread below it (at most 1,000), the thread first. */
  async getTree(threadId: string): Promise<ThreadRecord[]> {
    return request(this.#http, "get", "/threads/{id}/tree", { path: { id: threadId } });
  }

  /** What would wake the thread and each open thread below it; stuck ones are flagged. */
  async getWaiting(threadId: string): Promise<WaitingTree> {
    return request(this.#http, "get", "/threads/{id}/waiting", { path: { id: threadId } });
  }

  /** A thread's history as its model sees it, and the event number it goes up to. */
  async getHistory(threadId: string): Promise<History> {
    const { data: entries, response } = await exchange(this.#http, "get", "/threads/{id}/history", { path: { id: threadId } });
    const header = response.headers.get("Last-Event-ID");
    return { entries, lastEventId: header === null ? undefined : Number(header) };
  }

  /**
   * The thread's events as they happen, resuming by itself after a dropped connection (see
   * `EventStream`). Iterate it with `for await`; `break` or the `signal` stops it.
   *
   * ```ts
   * for await (const event of client.streamEvents("t1", { after: 0 })) {
   *   if (event.type === "assistant_text") console.log(event.text);
   * }
   * ```
   */
  streamEvents(threadId: string, options: StreamOptions = {}): EventStream {
    const route: keyof paths = "/threads/{id}/events";
    const url = this.#http.baseUrl + route.replace("{id}", encodeURIComponent(threadId));
    return new EventStream({ url, headers: this.#http.headers, fetch: this.#http.fetch }, options);
  }

  /**
   * Answers a question a tool server asked (a `choice_requested` event, or the record's
   * `open_choices`): `{selected: N}` picks choice N, `{dismiss: true}` sends its default. An
   * approval (a call waiting for a person's say, from the agent file's `approvals:`) is such a
   * question: `{selected: 0}` runs the call, `{dismiss: true}` declines it.
   */
  async answerChoice(threadId: string, callId: string, choice: Choice): Promise<Chosen> {
    return request(this.#http, "post", "/threads/{id}/choices/{call}", {
      path: { id: threadId, call: callId },
      body: choice,
    });
  }

  /**
   * Answers a call of a client tool (a `client_tool_call` event) with its result: `text` is what
   * the model reads (JSON or any text), `isError` says the call failed. Throws `InfinityError`
   * 409 when the call waits for no result (it has one already, is past its deadline, was
   * cancelled, or is no client tool's call). Two answers to a call at once: the first is kept.
   * `signal` abandons the request.
   */
  async postToolResult(threadId: string, callId: string, text: string, options: { isError?: boolean; signal?: AbortSignal } = {}): Promise<Accepted> {
    return request(
      this.#http,
      "post",
      "/threads/{id}/tool_results/{call}",
      { path: { id: threadId, call: callId }, body: { text, is_error: options.isError ?? false } },
      options.signal,
    );
  }

  /**
   * Runs the thread's client tools: answers each call of a tool in `handlers` with what its
   * handler returns (a string as it is, anything else as JSON; a promise is awaited; a thrown
   * error is sent as an error result), until `signal` aborts or the thread closes. Resolves
   * with the results it posted.
   *
   * It follows the thread's events from no position, so the calls made while no runner ran
   * (after a crash, say) come first. Each call's handler runs once per runner; a call answered
   * elsewhere meanwhile (409) is skipped; calls of tools without a handler are left alone. With
   * `followChildren` (the default) the threads spawned below are followed too. A handler may
   * run again for a call after the application restarts (the runtime keeps the first answer
   * only): make handlers with side effects idempotent, e.g. keyed by `call.call_id`.
   *
   * Every request it makes (the streams, the thread lookups, the results) is tried again after
   * a failed connection, 408, 429 or 5xx, waiting 250 ms, then twice as long each time up to
   * 5 s (less up to half at random), or the answer's `Retry-After`; no attempt starts more than
   * 60 s after the first failure in a row. It rejects with the first error it cannot go past
   * (another 4xx, or a minute of failures). A result being posted when the run ends goes on for
   * up to 10 s more.
   *
   * ```ts
   * await client.runTools("t1", { pick_color: ({ for: what }) => `teal, for the ${what}` }, { signal });
   * ```
   */
  async runTools(threadId: string, handlers: Record<string, ToolHandler>, options: RunToolsOptions = {}): Promise<ToolAnswer[]> {
    return new ToolRunner(this, threadId, handlers, options.followChildren ?? true).run(options.signal);
  }

  /** Cancels the thread's calls in flight (`tree`: its descendants' too). */
  async interrupt(threadId: string, options: TreeOption = {}): Promise<Accepted> {
    return request(this.#http, "post", "/threads/{id}/interrupt", {
      path: { id: threadId },
      body: treeBody(options),
    });
  }

  /** Closes the thread; `tree` is required when it has open children, which close with it. */
  async closeThread(threadId: string, options: TreeOption = {}): Promise<Accepted> {
    return request(this.#http, "post", "/threads/{id}/close", {
      path: { id: threadId },
      body: treeBody(options),
    });
  }

  /** The thread's recurring schedules. */
  async listSchedules(threadId: string): Promise<Schedule[]> {
    return request(this.#http, "get", "/threads/{id}/schedules", { path: { id: threadId } });
  }

  /**
   * Creates a recurring schedule on the thread, as its `schedule_create` tool would: at each
   * occurrence the thread receives `message`. E.g. `{message: "Water the plants", cron:
   * "0 7 * * *", timezone: "Europe/Berlin"}`.
   */
  async createSchedule(threadId: string, args: ScheduleArgs): Promise<ScheduleCreated> {
    return request(this.#http, "post", "/threads/{id}/schedules", {
      path: { id: threadId },
      body: args,
    });
  }

  /** Deletes one of the thread's schedules (404 when it has no such schedule). */
  async deleteSchedule(threadId: string, scheduleId: string): Promise<Accepted> {
    return request(this.#http, "delete", "/threads/{id}/schedules/{schedule}", {
      path: { id: threadId, schedule: scheduleId },
    });
  }

  /**
   * Switches the model of the thread's next completions: one `listModels` allows, or `null` for
   * the agent's own.
   */
  async useModel(threadId: string, model: string | null): Promise<Accepted> {
    return request(this.#http, "post", "/threads/{id}/model", {
      path: { id: threadId },
      body: { model },
    });
  }

  /** Moves the thread to another stored version of its agent: `NAME` (the newest) or `NAME@VERSION`. */
  async useAgent(threadId: string, agent: string): Promise<Accepted> {
    return request(this.#http, "post", "/threads/{id}/agent", {
      path: { id: threadId },
      body: { agent },
    });
  }

  /**
   * Sets the lifetime budget of the thread's conversation (`usd`, `tokens`); what it leaves out
   * stays. The answer's `thread_id` is the conversation's root, which keeps the budget.
   */
  async setBudget(threadId: string, budget: NewBudget): Promise<Accepted> {
    return request(this.#http, "post", "/threads/{id}/budget", {
      path: { id: threadId },
      body: budget,
    });
  }

  /** The models threads may be switched to besides their agent's own. */
  async listModels(): Promise<Models> {
    return request(this.#http, "get", "/models", {});
  }

  /** The default agent and the stored ones (the newest version of each). */
  async listAgents(): Promise<Agents> {
    return request(this.#http, "get", "/agents", {});
  }
}

/** `{"tree": ...}` when asked for, else no body at all. */
function treeBody(options: TreeOption): { tree: boolean } | undefined {
  return options.tree === undefined ? undefined : { tree: options.tree };
}
