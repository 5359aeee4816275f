/**
 * The client-tool runner against scripted streams, for what a real server shows rarely: the
 * snapshot and the numbered event showing the same call, a `reset` (events lost), and a result
 * refused with 409 because another runner answered first. Also how results are written.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { EventStream, InfinityError, ToolRunner, errorText, resultText, type Accepted, type ClientToolCall, type ThreadRecord, type ToolClient } from "../src/index.js";
import { until } from "./support/server.js";

const AT = "2026-01-01T00:00:00Z";

/** A `client_tool_call` event as the server writes it (numbered when `seq` is given). */
function call(callId: string, name = "pick_color", seq?: number): string {
  const data: ClientToolCall = { thread_id: "t", at: AT, type: "client_tool_call", call_id: callId, name, args: { for: callId } };
  if (seq !== undefined) data.seq = seq;
  return `event: client_tool_call\ndata: ${JSON.stringify(data)}\n${seq === undefined ? "" : `id: ${seq}\n`}\n`;
}

function notice(type: "attached" | "reset", after: number): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, thread_id: "t", after })}\nid: ${after}\n\n`;
}

/** Serves `script[n]` to the n-th connection, then holds it open (a live stream) until aborted. */
function scriptedFetch(script: string[][], requests: Headers[]): typeof globalThis.fetch {
  return async (_input, init) => {
    requests.push(new Headers(init?.headers));
    const texts = script.shift() ?? [];
    const signal = init?.signal ?? undefined;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const text of texts) controller.enqueue(new TextEncoder().encode(text));
        signal?.addEventListener("abort", () => controller.error(signal.reason), { once: true });
      },
    });
    return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
}

test("results are sent as text or JSON, errors as their name and message", () => {
  assert.equal(resultText("teal"), "teal");
  assert.equal(resultText({ color: "teal", n: [1, 2] }), '{"color":"teal","n":[1,2]}');
  assert.equal(resultText(undefined), "null");
  assert.equal(resultText(3), "3");
  assert.equal(errorText(new RangeError("no colours left")), "RangeError: no colours left");
  assert.equal(errorText(new Error()), "Error");
  assert.equal(errorText("just a string"), "just a string");
});

test("a runner runs each handler once, and starts again from the snapshot after a reset", async () => {
  const requests: Headers[] = [];
  const fetch = scriptedFetch(
    [
      [
        call("c1"), // the snapshot's
        notice("attached", 2),
        call("c1", "pick_color", 3), // the same call, numbered
        call("c2", "measure", 4), // no handler: left alone
        call("c3", "pick_color", 5), // answered elsewhere meanwhile: 409
        notice("reset", 9),
      ],
      [call("c1"), call("c4"), notice("attached", 9)], // the snapshot again, after the reset
    ],
    requests,
  );
  const posted: [string, string, boolean][] = [];
  const fake: ToolClient = {
    streamEvents: (threadId, options) => new EventStream({ url: `http://fake/threads/${threadId}/events`, headers: {}, fetch }, options),
    getThread: async () => ({ status: "open", children: [] }) as unknown as ThreadRecord,
    postToolResult: async (threadId, callId, text, options) => {
      posted.push([callId, text, options?.isError ?? false]);
      if (callId === "c3") throw new InfinityError(409, `thread t has no call ${callId} waiting for a result`);
      return { thread_id: threadId, input_id: `${callId}-client-result` } satisfies Accepted;
    },
  };
  const ran: string[] = [];
  const stop = new AbortController();
  const running = new ToolRunner(fake, "t", {
    pick_color: async (args: { for: string }) => {
      ran.push(args.for);
      if (args.for === "c4") throw new TypeError("no paint");
      return `teal for ${args.for}`;
    },
  }).run(stop.signal);
  await until("the three results", () => posted.length >= 3);
  stop.abort();
  const answers = await running;

  assert.deepEqual([...ran].sort(), ["c1", "c3", "c4"]);
  assert.deepEqual(
    requests.map((h) => h.get("Last-Event-ID")),
    [null, null],
    "each stream starts without a position",
  );
  assert.deepEqual([...posted].sort(), [
    ["c1", "teal for c1", false],
    ["c3", "teal for c3", false],
    ["c4", "TypeError: no paint", true],
  ]);
  assert.deepEqual(
    answers.map((a) => [a.callId, a.accepted, a.isError]).sort(),
    [
      ["c1", true, false],
      ["c3", false, false],
      ["c4", true, true],
    ],
  );
});
