/**
 * The retry policy (which errors are tried again, how long to wait, when to give up), and the
 * client-tool runner and the event stream following it against scripted fetches and clients.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { Backoff, EventStream, InfinityError, ToolRunner, retryable, type Accepted, type ClientToolCall, type StreamOptions, type ThreadRecord, type ToolClient } from "../src/index.js";
import { retryAfterMs } from "../src/errors.js";
import { until } from "./support/server.js";

test("what is tried again: failed connections, timeouts, 408, 429 and 5xx", () => {
  assert.ok(retryable(new TypeError("fetch failed")));
  assert.ok(retryable(new DOMException("too slow", "TimeoutError")));
  for (const status of [408, 429, 500, 502, 503, 504]) assert.ok(retryable(new InfinityError(status, "again")), String(status));
  for (const status of [400, 401, 403, 404, 409, 422]) assert.ok(!retryable(new InfinityError(status, "final")), String(status));
  assert.ok(!retryable(new RangeError("a bug")));
  assert.ok(!retryable(new DOMException("stopped", "AbortError")));
});

test("waits double with jitter up to a cap, and a Retry-After is waited as it is", () => {
  const full = new Backoff({ firstMs: 250, mostMs: 5000, random: () => 0 });
  const failed = new TypeError("fetch failed");
  assert.deepEqual(
    Array.from({ length: 7 }, () => full.failed(failed)),
    [250, 500, 1000, 2000, 4000, 5000, 5000],
  );
  const halved = new Backoff({ firstMs: 250, random: () => 1 });
  assert.deepEqual([halved.failed(failed), halved.failed(failed)], [125, 250]);
  full.succeeded();
  assert.equal(full.failed(failed), 250, "a success starts afresh");
  assert.equal(full.failed(new InfinityError(429, "slow down", 3000)), 3000);
  assert.throws(() => full.failed(new InfinityError(422, "bad body")), InfinityError);

  assert.equal(retryAfterMs("3"), 3000);
  assert.equal(retryAfterMs(null), undefined);
  assert.equal(retryAfterMs("soon"), undefined);
  const later = retryAfterMs(new Date(Date.now() + 30_000).toUTCString()) ?? 0;
  assert.ok(later > 25_000 && later <= 30_000, String(later));
});

test("the budget ends the retries", () => {
  let now = 100_000;
  const backoff = new Backoff({ firstMs: 1000, mostMs: 4000, budgetMs: 10_000, now: () => now, random: () => 0 });
  let waited = 0;
  const last = new TypeError("last");
  assert.throws(() => {
    for (;;) {
      const wait = backoff.failed(last);
      waited += wait;
      now += wait + 100; // the wait, and the attempt's own time
    }
  }, last);
  // 1 + 2 + 4 s (and the attempts) = 7.3 s; another 4 s would start the next past 10 s.
  assert.equal(waited, 7000);
});

test("a stream given retryForMs gives up after failing that long", async () => {
  let attempts = 0;
  const fetch: typeof globalThis.fetch = async () => {
    attempts += 1;
    throw new TypeError("fetch failed");
  };
  const stream = new EventStream({ url: "http://nowhere/threads/t/events", headers: {}, fetch }, { retryMs: 10, maxRetryMs: 20, retryForMs: 100 });
  const started = Date.now();
  await assert.rejects(
    (async () => {
      for await (const event of stream) assert.fail(`an event: ${JSON.stringify(event)}`);
    })(),
    TypeError,
  );
  assert.ok(attempts >= 3, `${attempts} attempts`);
  assert.ok(Date.now() - started < 2000);
});

const AT = "2026-01-01T00:00:00Z";

/** A stream of one `client_tool_call` for each of `calls`, then `attached`, then nothing. */
function scripted(calls: string[]): typeof globalThis.fetch {
  const events = calls.map((callId) => {
    const data: ClientToolCall = { thread_id: "t", at: AT, type: "client_tool_call", call_id: callId, name: "pick_color", args: { for: callId } };
    return `event: client_tool_call\ndata: ${JSON.stringify(data)}\n\n`;
  });
  events.push(`event: attached\ndata: ${JSON.stringify({ type: "attached", thread_id: "t", after: 0 })}\nid: 0\n\n`);
  return async (_input, init) => {
    const signal = init?.signal ?? undefined;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const text of events) controller.enqueue(new TextEncoder().encode(text));
        signal?.addEventListener("abort", () => controller.error(signal.reason), { once: true });
      },
    });
    return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
}

/** A client whose lookups and posts meet `lookups` and `posts` in turn (then succeed). */
function flakyClient(calls: string[], lookups: unknown[], posts: unknown[]) {
  const seen = { lookups: 0, posts: [] as [string, number][], streamOptions: [] as (StreamOptions | undefined)[] };
  const fetch = scripted(calls);
  const client: ToolClient = {
    streamEvents: (threadId, options) => {
      seen.streamOptions.push(options);
      return new EventStream({ url: `http://fake/threads/${threadId}/events`, headers: {}, fetch }, options);
    },
    getThread: async () => {
      seen.lookups += 1;
      const error = lookups.shift();
      if (error !== undefined) throw error;
      return { status: "open", children: [] } as unknown as ThreadRecord;
    },
    postToolResult: async (threadId, callId) => {
      seen.posts.push([callId, Date.now()]);
      const error = posts.shift();
      if (error !== undefined) throw error;
      return { thread_id: threadId, input_id: `${callId}-client-result` } satisfies Accepted;
    },
  };
  return { client, seen };
}

/** Runs a runner on `client` until `done()`, then stops it: what it resolved to. */
async function runUntil(client: ToolClient, done: () => boolean) {
  const stop = new AbortController();
  const running = new ToolRunner(client, "t", { pick_color: (args: { for: string }) => `teal for ${args.for}` }).run(stop.signal);
  await until("the runner's requests", () => done());
  stop.abort(); // the last attempt, under way, is not cut short
  return running;
}

test("a result is posted again after 5xx, waiting what Retry-After asks, and after a failed connection", async () => {
  const { client, seen } = flakyClient(["c1"], [], [new InfinityError(503, "restarting", 300), new TypeError("fetch failed")]);
  const answers = await runUntil(client, () => seen.posts.length >= 3);
  assert.deepEqual(answers.map((a) => [a.callId, a.accepted]), [["c1", true]]);
  const [first = 0, second = 0] = seen.posts.map(([, at]) => at);
  assert.ok(second - first >= 290, `came back after ${second - first} ms`); // timers may fire a ms early
  // The runner's streams try again for a minute, as its other requests do.
  const options = seen.streamOptions[0] ?? {};
  assert.deepEqual([options.retryMs, options.maxRetryMs, options.retryForMs], [250, 5000, 60_000]);
});

test("a lookup that fails is made again, and the result still posted", async () => {
  const { client, seen } = flakyClient(["c1"], [new TypeError("fetch failed"), new InfinityError(502, "bad gateway")], []);
  const answers = await runUntil(client, () => seen.lookups >= 3 && seen.posts.length >= 1);
  assert.deepEqual(answers.map((a) => [a.callId, a.accepted]), [["c1", true]]);
  assert.equal(seen.lookups, 3);
});

test("a 409 is final: the result is not posted again", async () => {
  const { client, seen } = flakyClient(["c1"], [], [new InfinityError(409, "answered already")]);
  const answers = await runUntil(client, () => seen.posts.length >= 1);
  assert.deepEqual(answers.map((a) => [a.callId, a.accepted]), [["c1", false]]);
  assert.equal(seen.posts.length, 1);
});

test("another refusal ends the run with it", async () => {
  const { client, seen } = flakyClient(["c1"], [], [new InfinityError(422, "the body is wrong")]);
  await assert.rejects(new ToolRunner(client, "t", { pick_color: () => "teal" }).run(), (error: unknown) => error instanceof InfinityError && error.status === 422);
  assert.equal(seen.posts.length, 1);
});
